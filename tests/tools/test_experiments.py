"""Every conf/experiment file: it has a command header, every point of its sweep composes and passes the
config checks, and tools/experiment.py runs its grids then its table. (The other subjects this file held are
tests/models/test_pooling_and_heads.py, tests/models/test_positional.py, tests/tools/test_attention_tools.py
and tests/tools/test_results_table_factors.py.)"""

import csv
import json
import re

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import CONF, compose_config

EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


# --------------------------------------------------------------------------------------------
# Every experiment file: composes, and every point of its sweep is a valid config
# --------------------------------------------------------------------------------------------
def _product(items: list[tuple[str, str]]) -> list[list[str]]:
    points = [[]]
    for key, values in items:
        points = [p + [f"{key}={v.strip()}"] for p in points for v in str(values).split(",")]
    return points


def sweep_points(name: str) -> list[list[str]]:
    """The override lists of an experiment's runs: its hydra.sweeper.params, or every line of its
    experiment_grids (tools/experiment.py runs them), or [[]] for a single run."""
    spec = yaml.safe_load((CONF / "experiment" / f"{name}.yaml").read_text())
    if spec.get("experiment_grids"):
        return [
            p for line in spec["experiment_grids"] for p in _product([tuple(o.split("=", 1)) for o in line.split()])
        ]
    params = (spec.get("hydra") or {}).get("sweeper", {}).get("params", {})
    return _product(list(params.items()))


def test_experiment_runner_runs_every_grid_then_the_table(tmp_path, monkeypatch):
    """tools/experiment.py: one multirun per line of experiment_grids, in order, with the extra overrides,
    then the table of the experiment's sweep directory."""
    from tools import experiment

    calls = []
    monkeypatch.setattr(experiment.subprocess, "call", lambda cmd, cwd=None: calls.append(cmd[1:]) or 0)
    assert experiment.main(["sst", "trainer.max_epochs=1"]) == 0
    grids = yaml.safe_load((CONF / "experiment" / "sst.yaml").read_text())["experiment_grids"]
    assert len(calls) == len(grids) + 1
    for call, line in zip(calls, grids):
        assert call[:3] == ["train.py", "-m", "experiment=sst"] and call[3:] == line.split() + ["trainer.max_epochs=1"]
    assert calls[-1][:3] == ["-m", "tools.results_table", "docs/results/runs/sst.jsonl"]
    assert experiment.grids_of("listops_best") == [["seed=0,1,2"]]  # its 3 seeds, one grid
    calls.clear()  # an essay experiment: runs resume, scale=small goes to its own directories
    assert experiment.main(["heads", "scale=small"]) == 0
    assert calls[0][3:] == ["model.num_heads=1,2,4,8", "seed=0,1,2", "trainer.resume=auto", "scale=small"]
    assert calls[1][:3] == ["-m", "tools.results_table", "docs/results/runs/small/heads.jsonl"]
    assert "--out=docs/results/small/heads.md" in calls[1]
    assert calls[2][:3] == ["-m", "studies.prune_heads", "multirun/small/heads/model.num_heads=8,seed=0"]
    calls.clear()  # an experiment_then analysis runs after the table
    assert experiment.main(["long_range", "--table-only"]) == 0
    assert calls[0][:3] == ["-m", "tools.results_table", "docs/results/runs/long_range.jsonl"]
    assert calls[1][:3] == ["-m", "studies.long_range", "multirun/long_range"] and len(calls) == 2
    with pytest.raises(SystemExit, match="no experiment 'nope'; valid: .*sst"):
        experiment.grids_of("nope")


def test_experiment_files_have_a_command_header():
    for name in EXPERIMENTS:
        text = (CONF / "experiment" / f"{name}.yaml").read_text()
        assert text.startswith("# @package _global_"), name
        header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        commands = re.findall(r"experiment=(\w+)|make (\w+)|E=(\w+)", header)
        assert any(name in c for c in commands), f"{name}.yaml: its header must give the command that runs it"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_sweep_point_composes_and_passes_the_config_checks(name):
    from engine.config import check_config

    points = sweep_points(name)
    assert len(points) >= 1
    for point in points:
        cfg = compose_config([f"experiment={name}", *point])
        check_config(cfg)
        for override in point:
            key, value = override.split("=")
            if key in ("dataset",):  # a config group: compare its name
                assert cfg.dataset.name == value, (name, override)
                continue
            got = cfg[key].name if key in ("model", "graph", "optim") else OmegaConf.select(cfg, key)
            assert str(got).lower() == value.lower(), (name, override)


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_runs_a_few_steps(name, tmp_path):
    """One run per grid line of each experiment (each key at its first value), shrunk to seconds (pytest -m slow)."""
    from tests.conftest import assert_breakdowns_match_test_acc, run_script

    def check(run_dir):  # a run too short to learn: its numbers must at least agree with one another
        results = json.loads((run_dir / "results.json").read_text())
        assert_breakdowns_match_test_acc(results)
        with open(run_dir / "metrics.csv") as f:
            assert results["best_val_acc"] == max(float(r["val_acc"]) for r in csv.DictReader(f))

    tiny = ["debug=tiny", "trainer.max_epochs=1", "dataset.num_train=64", "dataset.num_val=32", "dataset.num_test=32"]
    spec = yaml.safe_load((CONF / "experiment" / f"{name}.yaml").read_text())
    if spec.get("experiment_grids"):  # one run per grid line (its first value of every key)
        data_dir = (spec.get("dataset") or {}).get("data_dir")
        if data_dir and not (CONF.parent / data_dir).is_dir():
            pytest.skip(f"experiment={name} reads {data_dir}, which is not beside this checkout")
        if "override /dataset" in str(spec.get("defaults")) and "listops_long" in str(spec.get("defaults")):
            tiny.append("dataset.min_length=20")  # debug=tiny caps lengths at 40
        for k, line in enumerate(spec["experiment_grids"]):
            first = [o.split(",")[0] for o in line.split()]
            run_script("train.py", f"experiment={name}", *first, *tiny, f"hydra.run.dir={tmp_path}/{k}", timeout=900)
            check(tmp_path / str(k))
        return
    points = sweep_points(name)
    if points == [[]]:
        run_script("train.py", f"experiment={name}", *tiny, f"hydra.run.dir={tmp_path}/run")
        results = [tmp_path / "run" / "results.json"]
    else:
        run_script("train.py", "-m", f"experiment={name}", *tiny, f"hydra.sweep.dir={tmp_path}/sweep", timeout=900)
        results = sorted((tmp_path / "sweep").glob("*/results.json"))
    assert len(results) == len(points)
    for path in results:
        check(path.parent)
