"""A newcomer's first hour as one test (issue 31; ``make smoke``): on a clean copy of the repository, the
README's quickstart for 2 epochs, ``model=minilm`` as typed on a small treebank written here (it must learn,
with its own fine-tuning recipe), ``evaluate.py`` on the checkpoints, and ``tools.embed`` on 3 sentences.
It fails when a command breaks or a default regresses (the quickstart's recipe, MiniLM's lr 3e-5)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.helpers.treebank import write_treebank


def clean_copy(dest: Path) -> Path:
    """The working tree's files as git sees them (tracked and new, ignored ones left out): no outputs/, no caches."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def typed(repo: Path, *args: str, timeout: int = 900) -> str:
    """``python <args>`` in ``repo``, as a user types it; fails the test with the end of its output."""
    res = subprocess.run([sys.executable, *args], cwd=repo, capture_output=True, text=True, timeout=timeout)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"`python {' '.join(args)}` failed:\n{out[-3000:]}"
    return out


def epochs_of(run: Path) -> list[dict]:
    with open(run / "metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_newcomers_first_hour(tmp_path):
    repo = clean_copy(tmp_path / "tagnn")
    assert not (repo / "outputs").exists() and (repo / "train.py").is_file()

    # the README's quickstart, for 2 epochs: a GAT on generated ListOps, with the scratch recipe (lr 1e-3)
    gat = repo / "outputs" / "quickstart"
    out = typed(repo, "train.py", "model=gat", "graph=complete", "trainer.max_epochs=2", f"hydra.run.dir={gat}")
    results = json.loads((gat / "results.json").read_text())
    assert (results["model"], results["graph"], results["epochs"]) == ("gat", "complete", 2)
    assert 0.0 <= results["test_acc"] <= 1.0 and "test acc" in out
    assert results["num_examples"]["train"] == 6000
    assert max(float(r["lr"]) for r in epochs_of(gat)) > 5e-4  # cosine from 1e-3: still high after 2 of 2 epochs

    # then evaluate its checkpoint, as the README says: the same test accuracy, and the confusion matrix
    ev = repo / "outputs" / "eval_quickstart"
    typed(repo, "evaluate.py", f"checkpoint={gat}/checkpoints/best.pt", f"hydra.run.dir={ev}")
    assert json.loads((ev / "eval.json").read_text())["accuracy"] == pytest.approx(results["test_acc"], abs=1e-9)
    assert (ev / "confusion.png").is_file()

    # model=minilm as typed, nothing but the data named: it must bring its fine-tuning recipe and learn
    bank = write_treebank(tmp_path / "treebank", train=200, dev=60, test=100)
    mini = repo / "outputs" / "minilm"
    typed(repo, "train.py", "model=minilm", "dataset=sst_binary", f"dataset.data_dir={bank}", f"hydra.run.dir={mini}")
    results = json.loads((mini / "results.json").read_text())
    assert (results["model"], results["epochs"], results["num_examples"]["train"]) == ("minilm", 2, 200)
    assert results["test_acc"] >= 0.8, f"model=minilm at {results['test_acc']:.2f} on a task at chance 0.5"
    rows = epochs_of(mini)
    assert int(rows[0]["step"]) == 7  # batch 32: 200 sentences in 7 steps
    assert max(float(r["lr"]) for r in rows) <= 3e-5 and float(rows[-1]["lr"]) == 0.0  # linear decay to 0

    ev = repo / "outputs" / "eval_minilm"
    typed(repo, "evaluate.py", f"checkpoint={mini}/checkpoints/best.pt", f"hydra.run.dir={ev}")
    assert json.loads((ev / "eval.json").read_text())["accuracy"] == pytest.approx(results["test_acc"], abs=1e-9)

    # sentence embeddings of 3 sentences: unit vectors, and the two paraphrases closest
    (tmp_path / "three.txt").write_text("The movie was great .\nThe film was wonderful .\nStock prices fell today .\n")
    typed(repo, "-m", "tools.embed", "--in", str(tmp_path / "three.txt"), "--out", str(tmp_path / "three.npy"))
    emb = np.load(tmp_path / "three.npy")
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    sim = emb @ emb.T
    assert sim[0, 1] > sim[0, 2] + 0.2 and sim[0, 1] > sim[1, 2] + 0.2, sim
