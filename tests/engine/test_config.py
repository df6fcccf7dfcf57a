"""Config groups compose, and bad values fail with one line that lists the valid ones."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT, compose_config
from train import run


def cli(*args, tmp_path):
    return subprocess.run(
        [sys.executable, "train.py", *args, f"hydra.run.dir={tmp_path}", "logger=none"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "group,valid", [("model", ["gat", "gcn", "transformer"]), ("graph", ["complete", "knn", "none", "tree", "window"])]
)
def test_unknown_group_value_lists_the_valid_ones(group, valid, tmp_path):
    res = cli(f"{group}=foo", tmp_path=tmp_path)
    assert res.returncode != 0
    assert f"Could not find '{group}/foo'" in res.stderr
    for name in valid:
        assert name in res.stderr


@pytest.mark.parametrize(
    "override,message",
    [
        ("model.readout=bogus", "unknown model.readout 'bogus'; valid: mean, root, cls"),
        ("model.positional=bogus", "valid: sinusoidal, none"),
        ("device=tpu", "valid: auto, cpu, cuda"),
        ("optim.name=sgd", "unknown optim.name 'sgd'; valid: adamw, adagrad"),
        ("logger.mode=sometimes", "valid: auto, online, offline, disabled"),
        ("trainer.max_epochs=0", "trainer.max_epochs must be an integer >= 1, got 0"),
        ("trainer.max_epochs=abc", "trainer.max_epochs must be an integer >= 1, got 'abc'"),
        ("model.num_heads=3", "model.hidden_dim=32 must be divisible by model.num_heads=3"),
        ("dataset.num_test=0", "the test split is empty"),
    ],
)
def test_bad_values_fail_clearly(override, message, tmp_path, tiny_overrides):
    overrides = [o for o in tiny_overrides if not (override.startswith("logger") and o.startswith("logger"))]
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run(compose_config(overrides + [override]), tmp_path)
    assert not (tmp_path / "results.json").exists()


def test_cli_error_is_one_line(tmp_path):
    res = cli("debug=tiny", "model.readout=bogus", tmp_path=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["error: unknown model.readout 'bogus'; valid: mean, root, cls"]


@pytest.mark.parametrize("model", ["gcn", "gat", "transformer"])
def test_every_group_composes(model):
    for graph in ("complete", "tree", "window", "knn", "none"):
        cfg = compose_config([f"model={model}", f"graph={graph}", "logger=none"])
        assert (cfg.model.name, cfg.graph.name) == (model, graph)
    for preset in ("debug=tiny", "debug=overfit", "experiment=graph_choice"):
        assert compose_config([preset]).dataset.name == "listops"
