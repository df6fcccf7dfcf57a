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

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "old_checkpoints"
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
