"""evaluate.py rebuilds everything from a checkpoint and reproduces the run's test accuracy."""

import json
import subprocess
import sys

import pytest
import torch

from data import listops
from data.pipeline import load_splits
from evaluate import evaluate
from tests.conftest import ROOT, compose_config
from train import run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    cfg = compose_config(
        [
            "debug=tiny",
            "trainer.progress=false",
            "logger=none",
            "model=gat",
            "graph=tree",
            "trainer.max_epochs=3",
            "optim.lr=3e-3",
        ]
    )
    return out, run(cfg, out), cfg


def eval_cfg(**kw):
    return compose_config([f"{k}={v}" for k, v in kw.items()], config_name="evaluate")


def test_reproduces_test_accuracy(trained, tmp_path):
    out, results, _ = trained
    result = evaluate(eval_cfg(checkpoint=out / "checkpoints" / "best.pt"), tmp_path)
    assert result["accuracy"] == results["test_acc"]
    saved = json.loads((tmp_path / "eval.json").read_text())
    assert saved["accuracy"] == results["test_acc"]
    assert {"by_depth", "by_length", "by_root", "confusion"} <= saved.keys()
    assert sum(v["n"] for v in saved["by_depth"].values()) == results["num_examples"]["test"]
    assert sum(map(sum, saved["confusion"])) == results["num_examples"]["test"]
    assert (tmp_path / "confusion.png").stat().st_size > 1000


@pytest.mark.parametrize("layout", ["listops", "lra"])
def test_data_file_in_both_layouts(trained, tmp_path, layout):
    """The test split written as a TSV scores exactly like the split itself."""
    out, results, cfg = trained
    test_rows = load_splits(cfg.dataset)["test"]
    path = tmp_path / f"test_{layout}.tsv"
    listops.write_tsv(test_rows, path, layout=layout)
    result = evaluate(eval_cfg(checkpoint=out / "checkpoints" / "best.pt", data_file=path), tmp_path / "ev")
    assert result["accuracy"] == results["test_acc"]
    assert result["data"] == str(path)


def test_bad_checkpoints_give_one_line_errors(trained, tmp_path):
    out, _, _ = trained
    with pytest.raises(FileNotFoundError, match="pass checkpoint="):
        evaluate(eval_cfg(), tmp_path)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        evaluate(eval_cfg(checkpoint=tmp_path / "missing.pt"), tmp_path)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes((out / "checkpoints" / "best.pt").read_bytes()[:500])
    with pytest.raises(ValueError, match="truncated or foreign"):
        evaluate(eval_cfg(checkpoint=truncated), tmp_path)
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {}}, foreign)
    with pytest.raises(ValueError, match="not a tagnn-checkpoint"):
        evaluate(eval_cfg(checkpoint=foreign), tmp_path)
    other_vocab = tmp_path / "other_vocab.pt"
    ckpt = torch.load(out / "checkpoints" / "best.pt", weights_only=True)
    ckpt["vocab"] = ckpt["vocab"] + ["extra-token"]
    torch.save(ckpt, other_vocab)
    with pytest.raises(ValueError, match="do not match its vocabulary"):
        evaluate(eval_cfg(checkpoint=other_vocab), tmp_path)
    assert not (tmp_path / "eval.json").exists()


def test_command_line(trained, tmp_path):
    out, results, _ = trained
    ok = subprocess.run(
        [
            sys.executable,
            "evaluate.py",
            f"checkpoint={out / 'checkpoints' / 'best.pt'}",
            f"hydra.run.dir={tmp_path / 'cli'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert f"accuracy {results['test_acc']:.4f}" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "evaluate.py", f"checkpoint={tmp_path / 'nope.pt'}", f"hydra.run.dir={tmp_path / 'cli2'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("error: no checkpoint at") and len(bad.stderr.strip().splitlines()) == 1
