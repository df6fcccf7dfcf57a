"""Checkpoints written before the registries and typed configs (commit 7988780) still load, evaluate to the
very same predictions, and resume.

tests/fixtures/old_checkpoints/ holds two best.pt files that commit's train.py wrote (the command is in
expected.json, with what that commit's evaluate.py printed for them): a Transformer, whose config carries
every key of the shared encoder, and a Tree-LSTM, whose config carries the 20 encoder keys it never used.
"""

import json
from pathlib import Path

import pytest
import torch

from tests.conftest import compose_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "old_checkpoints"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())


@pytest.mark.parametrize("model", ["transformer", "treelstm"])
def test_old_checkpoint_evaluates_to_the_same_predictions(model, tmp_path):
    from evaluate import evaluate

    path = FIXTURES / f"{model}.pt"
    old = torch.load(path, weights_only=True)
    assert old["format"] == "tagnn-checkpoint-v1" and "impl" in old["config"]["model"]  # the old layout
    cfg = compose_config([f"checkpoint={path}", "device=cpu"], config_name="evaluate")
    result = evaluate(cfg, tmp_path)
    want = EXPECTED[model]
    assert (result["model"], result["graph"], result["epoch"]) == (model, want["graph"], want["epoch"])
    assert result["confusion"] == want["confusion"]  # prediction for prediction, per class
    assert result["accuracy"] == want["accuracy"]
    assert result["loss"] == pytest.approx(want["loss"], abs=1e-6)


def test_old_treelstm_checkpoint_resumes_under_todays_trimmed_config(tmp_path):
    """Its config carries the 20 encoder keys today's conf/model/treelstm.yaml no longer has: resuming from it
    with the same overrides goes on from its epoch (engine.checkpoint.upgrade_config makes the two agree)."""
    import shutil

    from engine.checkpoint import load_checkpoint
    from train import run

    path = FIXTURES / "treelstm.pt"
    old = torch.load(path, weights_only=True)
    (tmp_path / "checkpoints").mkdir()
    for name in ("best.pt", "last.pt"):  # the run directory the old train.py left (its best.pt was its last.pt)
        shutil.copy(path, tmp_path / "checkpoints" / name)
    cfg = compose_config(
        ["debug=tiny", "logger=none", "trainer.progress=false", "model=treelstm", "graph=tree"]
        + ["model.hidden_dim=16", "trainer.max_epochs=2", "trainer.resume=auto"]
    )
    assert "num_heads" not in cfg.model and "num_heads" in old["config"]["model"]
    results = run(cfg, tmp_path)
    last = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    steps_per_epoch = old["step"] // old["epoch"]
    assert (results["epochs"], last["epoch"], last["step"]) == (2, 2, old["step"] + steps_per_epoch)
    assert last["seen_examples"] == old["seen_examples"] + 256  # one more epoch of the tiny training split
