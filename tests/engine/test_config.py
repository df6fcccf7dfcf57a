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
        ("trainer.heartbeat_s=-5", "trainer.heartbeat_s must be a number of seconds >= 0 (0: off), got -5"),
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


# ---- the config is parsed once ----------------------------------------------------------------------
PARSERS = ("model_config", "graph_kind", "dataset_entry")  # each turns a name of cfg into a typed thing
STAGES = sorted(
    [*ROOT.glob("engine/*.py"), *ROOT.glob("models/**/*.py"), ROOT / "train.py", ROOT / "evaluate.py"]
)  # the run's stages: data, memory plan, model, fit, test, checkpoints, evaluate.py
PARSER_HOMES = {"engine/config.py", "models/registry.py"}  # check_config, parse_parts; the model registry itself


def parser_calls() -> dict[str, list[str]]:
    import ast

    found: dict[str, list[str]] = {}
    for path in STAGES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name in PARSERS:
                    found.setdefault(str(path.relative_to(ROOT)), []).append(f"{name} (line {node.lineno})")
    return found


def test_no_stage_parses_the_config_again():
    """check_config makes the RunConfig once (engine/config.py's parse_parts is the one lookup of a config's
    names, a checkpoint's too); no other stage calls the parsers that turn cfg's names into typed things."""
    calls = parser_calls()
    outside = {path: c for path, c in calls.items() if path not in PARSER_HOMES}
    assert not outside, f"parse the config in engine/config.py only (check_config / parse_parts): {outside}"
    assert "engine/config.py" in calls  # the scan sees calls


def test_train_reads_cfg_only_to_check_it():
    """train.py hands the Hydra cfg to check_config and reads only the typed RunConfig after that."""
    import ast

    tree = ast.parse((ROOT / "train.py").read_text())
    uses = []
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name != "main"):
        uses += [(fn.name, n.lineno) for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == "cfg"]
    (check,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "check_config"]
    assert uses == [("run", check.lineno)], f"train.py reads cfg beyond check_config(cfg): {uses}"


def test_the_run_config_is_typed_and_carries_every_stage_s_settings():
    from data.datasets import DatasetEntry
    from data.graphs import GraphKind
    from engine.config import OptimConfig, RunConfig, TrainerConfig, check_config
    from models import EncoderConfig

    overrides = ["debug=tiny", "graph=tree", "optim=adagrad", "trainer.progress=false", "trainer.log_every=7", "seed=3"]
    run_cfg = check_config(compose_config([*overrides, "trainer.eval_batch_size=100"]))
    assert isinstance(run_cfg, RunConfig)
    assert isinstance(run_cfg.dataset, DatasetEntry) and run_cfg.dataset.name == "listops"
    assert isinstance(run_cfg.graph, GraphKind) and run_cfg.graph.name == "tree" and run_cfg.graph.is_tree
    assert isinstance(run_cfg.model, EncoderConfig) and run_cfg.model.hidden_dim == 32
    assert run_cfg.trainer == TrainerConfig(2, 32, 100, "fp32", False, True, 7, False, None, 300.0)
    assert (run_cfg.seed, run_cfg.device) == (3, "auto")
    assert run_cfg.optim == OptimConfig("adagrad", 0.05, 1e-4, "cosine", 0.0, 1.0, None, None)
    assert check_config(compose_config([])).optim.betas == (0.9, 0.98)
    assert run_cfg.epoch_settings(False).max_epochs == 2 and run_cfg.resolved["graph"]["name"] == "tree"
