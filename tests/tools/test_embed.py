"""tools/embed.py: MiniLM sentence embeddings per line, on any lifted graph, with one-line errors."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tools import embed as tool

ROOT = Path(__file__).resolve().parents[2]
# sentences that appear in no other test or fixture
NEW = [
    "A heron stood motionless in the shallow reeds.",
    "Quarterly revenue beat the analysts' forecasts by a wide margin.",
    "Please don't leave the soldering iron switched on overnight.",
    "The choir rehearsed Bach's motet until well after midnight.",
    "Volcanic ash grounded flights across northern Europe for days.",
]


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def run(tmp_path, *args, text: str | bytes = "\n".join(NEW) + "\n"):
    src = write(tmp_path / "in.txt", text)
    out = tmp_path / "out.npy"
    return tool.main(["--in", str(src), "--out", str(out), *args]), out


def test_cli_matches_hf_bert_mean_pooling_on_new_sentences(tmp_path):
    from transformers import BertModel, BertTokenizerFast

    from models.minilm import model_dir

    src = write(tmp_path / "in.txt", "\n".join(NEW) + "\n")
    out = tmp_path / "emb.npy"
    cmd = [sys.executable, "-m", "tools.embed", "--model", "minilm", "--graph", "complete", "--in", str(src)]
    proc = subprocess.run([*cmd, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    assert got.dtype == np.float32 and got.shape == (5, 384)
    folder = str(model_dir())
    bert = BertModel.from_pretrained(folder, local_files_only=True).eval()
    enc = BertTokenizerFast.from_pretrained(folder, local_files_only=True)(NEW, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = bert(**enc).last_hidden_state  # (B, n, d)
    mask = enc["attention_mask"].unsqueeze(-1).float()
    ref = torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=-1).numpy()
    assert np.abs(got - ref).max() <= 1e-5


@pytest.mark.parametrize("graph", ["window", "none", "bpt", "dep"])
def test_every_graph_gives_unit_vectors_that_differ_from_complete(tmp_path, graph):
    rc, out = run(tmp_path, "--graph", "complete")
    assert rc == 0
    complete = np.load(out)
    rc, out = run(tmp_path, "--graph", graph)
    assert rc == 0
    got = np.load(out)
    assert got.shape == (5, 384) and np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    cos = (got * complete).sum(1)
    assert (cos < 0.9999).all() and (cos > 0.2).all()  # the graph changes the embedding, the model still works


def test_empty_line_is_one_line_error_naming_it_and_writes_nothing(tmp_path, capsys):
    out = write(tmp_path / "out.npy", b"previous result")
    rc, _ = run(tmp_path, text="First sentence.\n\nThird sentence.\n")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "line 2 is empty" in err
    assert out.read_bytes() == b"previous result"


def test_non_utf8_is_one_line_error_naming_the_line(tmp_path, capsys):
    rc, out = run(tmp_path, text=b"Fine.\nAlso fine.\nCaf\xe9 au lait.\n")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "line 3" in err and "0xe9" in err and "UTF-8" in err
    assert not out.exists()


def test_unknown_graph_lists_the_valid_ones(tmp_path, capsys):
    rc, out = run(tmp_path, "--graph", "hypercube")
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "'hypercube'" in err
    assert all(g in err for g in tool.graph_names())
    rc, _ = run(tmp_path, "--graph", "tree")  # no gold tree in a text file
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err and "--graph dep" in err
    assert not out.exists()


def test_long_line_is_truncated_and_counted(tmp_path, caplog):
    long = " ".join(["elephant"] * 300)  # one piece per word: 300 pieces + [CLS] + [SEP]
    with caplog.at_level(logging.WARNING, logger="tools.embed"):
        rc, out = run(tmp_path, text=f"{NEW[0]}\n{long}\n")
    assert rc == 0
    assert "1 line(s) longer than 256 pieces truncated (46 pieces cut)" in caplog.text and "line 2" in caplog.text
    got = np.load(out)
    cut = tool.embed([" ".join(["elephant"] * 254)])  # what survives truncation: 254 pieces
    assert got.shape == (2, 384) and np.abs(got[1] - cut[0]).max() <= 1e-5


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    out = write(tmp_path / "out.npy", b"previous result")

    def broken_save(f, array):
        f.write(b"\x93NUMPY half")
        raise OSError("disk full")

    monkeypatch.setattr(tool.np, "save", broken_save)
    with pytest.raises(OSError):
        tool.save_atomic(np.zeros((2, 384), np.float32), out)
    assert out.read_bytes() == b"previous result"
    assert [p.name for p in tmp_path.iterdir()] == ["out.npy"]  # no temporary file left behind
