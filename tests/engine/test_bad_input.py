"""Bad input ends with one line that names the fix, a non-zero exit, and no half-written output."""

import errno
import json
import subprocess
import sys

import pytest
import torch

import engine.io
from engine.checkpoint import load_checkpoint
from tests.conftest import ROOT, compose_config
from train import run

TINY = ["debug=tiny", "trainer.progress=false", "logger=none"]


def cli(script, *args, out):
    res = subprocess.run(
        [sys.executable, script, *args, f"hydra.run.dir={out}"], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    return res.returncode, res.stderr.strip().splitlines()


def files(tmp_path):
    garbage = tmp_path / "garbage.tsv"
    garbage.write_bytes(bytes(range(128, 256)) * 8)
    malformed = tmp_path / "malformed.tsv"
    malformed.write_text("7\t[MAX 2 7 ]\n3\t[SM 1 2\n")
    long_line = tmp_path / "long.tsv"
    long_line.write_text("0\t[SM " + "1 " * 300 + "]\n")
    empty_text = tmp_path / "empty_text.csv"
    empty_text.write_text("text,label\nfine words,1\n   ,0\n" + "more words,1\n" * 8)
    return {"garbage": garbage, "malformed": malformed, "long": long_line, "empty_text": empty_text}


CASES = [
    (["trainer.max_epochs=abc"], "trainer.max_epochs must be an integer >= 1, got 'abc'"),
    (["dataset.num_val=0"], "the val split is empty: set dataset.num_val > 0"),
    (["model.impl=fast"], "unknown model.impl 'fast'; valid: sparse, dense, auto"),
    (["dataset.test_file={garbage}"], "cannot read {garbage} as UTF-8 text"),
    (["dataset.test_file={malformed}"], "{malformed}:2: 1 operator(s) never closed"),
    (["dataset.test_file={long}"], "expression has 302 tokens, over dataset.max_length=40; raise dataset.max_length"),
    (
        [
            "dataset=text_files",
            "dataset.train_file={empty_text}",
            "dataset.test_file={empty_text}",
            "dataset.val_size=2",
            "dataset.cache_dir={tmp}",
        ],
        "has an empty 'text' at row",
    ),
    (
        ["dataset=text_files", "dataset.train_file={tmp}/missing.csv", "dataset.test_file={empty_text}"],
        "dataset.train_file: no such file",
    ),
    (["trainer.resume={tmp}/nothing.pt"], "no checkpoint at"),
]


@pytest.mark.parametrize("overrides,message", CASES, ids=[c[0][-1].split("=")[0] + str(i) for i, c in enumerate(CASES)])
def test_train_bad_input(overrides, message, tmp_path):
    paths = {**files(tmp_path), "tmp": tmp_path}
    out = tmp_path / "run"
    rc, lines = cli("train.py", *TINY, *[o.format(**paths) for o in overrides], out=out)
    assert rc == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert message.format(**paths) in lines[0]
    assert not (out / "results.json").exists() and not list(tmp_path.rglob("*.tmp"))


def test_evaluate_corrupt_checkpoint(tmp_path):
    bad = tmp_path / "best.pt"
    bad.write_bytes(b"PK\x03\x04 not really a checkpoint")
    rc, lines = cli("evaluate.py", f"checkpoint={bad}", out=tmp_path / "eval")
    assert rc == 2 and len(lines) == 1 and "not a readable tagnn checkpoint" in lines[0], lines
    assert not (tmp_path / "eval" / "eval.json").exists()


def test_disk_full_while_checkpointing_keeps_the_last_good_one(tmp_path, monkeypatch):
    real_save, calls = torch.save, []

    def save_until_the_disk_fills(obj, f):
        calls.append(1)
        if len(calls) > 2:  # epoch 1 wrote best.pt and last.pt; the disk fills in epoch 2
            f.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(obj, f)

    monkeypatch.setattr(engine.io.torch, "save", save_until_the_disk_fills)
    with pytest.raises(OSError, match="cannot write .*: No space left on device; free some space"):
        run(compose_config(TINY + ["trainer.max_epochs=3"]), tmp_path)
    monkeypatch.undo()
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt")["epoch"] == 1  # intact, loadable
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob(".*.tmp"))
    assert not (tmp_path / "results.json").exists()


def test_nan_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    from engine import loop  # where training computes its loss

    real, calls = loop.F.cross_entropy, []

    def diverging(logits, y, **kw):
        calls.append(1)
        loss = real(logits, y, **kw)
        return loss * float("nan") if len(calls) > 12 else loss  # epoch 1 (8 steps) is fine, then NaN

    monkeypatch.setattr(loop.F, "cross_entropy", diverging)
    with pytest.raises(ValueError, match=r"loss is nan at step \d+; lower optim.lr or set optim.grad_clip"):
        run(compose_config(TINY + ["trainer.max_epochs=3"]), tmp_path)
    monkeypatch.undo()
    assert load_checkpoint(tmp_path / "checkpoints" / "last.pt")["epoch"] == 1
    assert not (tmp_path / "results.json").exists()


def test_only_finished_runs_count_against_a_committed_results_file(tmp_path):
    """A run still training (or crashed) has .hydra/ but no results.json: it must not stand in for a finished
    committed run, or a half-trained folder would replace the committed table."""
    from engine.io import keep_committed, runs_committed, runs_in

    runs = tmp_path / "runs"
    for name, finished in (("a", True), ("b", False)):
        (runs / name / ".hydra").mkdir(parents=True)
        if finished:
            (runs / name / "results.json").write_text("{}")
    assert runs_in(runs) == 1 and runs_in(tmp_path / "missing") == 0
    committed = tmp_path / "t.json"
    committed.write_text(json.dumps({"runs": [{"dir": "a"}, {"dir": "b"}, {"dir": "c", "finished": False}]}))
    assert runs_committed(committed) == 2
    with pytest.raises(SystemExit, match=r"holds 1 runs, .*t\.json 2: add --table-only"):
        keep_committed(committed, runs_in(runs), runs, "add --table-only")
    (runs / "b" / "results.json").write_text("{}")
    keep_committed(committed, runs_in(runs), runs, "add --table-only")  # as many finished: goes on
