"""Hyperparameter search: Hydra's Optuna sweeper maximises what train.py returns (best val accuracy)."""

import json
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import run_script

SEARCHED = ("optim.lr", "model.num_layers", "model.share_weights", "graph")


def test_three_trial_optuna_sweep(tmp_path):
    """3 trials at 3 different points; each point is the config its run trained with, and is scored by that
    run's best validation accuracy; the reported best is the best of the 3 and its point."""
    run_script(
        "train.py",
        "-m",
        "hparams_search=listops_optuna",
        "debug=tiny",
        "hydra.sweeper.n_trials=3",
        f"hydra.sweep.dir={tmp_path}",
        "+hydra.callbacks.record._target_=tests.helpers.sweep_record.RecordJobs",  # jobs.jsonl: each job's objective
    )
    jobs = [json.loads(line) for line in (tmp_path / "jobs.jsonl").read_text().splitlines()]
    assert [j["num"] for j in jobs] == [0, 1, 2]
    points = []
    for job in jobs:
        sampled = {k: v.lower() for k, v in (o.split("=", 1) for o in job["overrides"]) if k in SEARCHED}
        assert sampled.keys() == set(SEARCHED), job["overrides"]
        points.append(tuple(sorted(sampled.items())))
        cfg = OmegaConf.load(Path(job["dir"]) / ".hydra" / "config.yaml")  # what the run trained with
        ran = (cfg.optim.lr, cfg.model.num_layers, str(cfg.model.share_weights).lower(), cfg.graph.name)
        lr, layers, shared, graph = (sampled[k] for k in SEARCHED)
        assert ran == (pytest.approx(float(lr), rel=1e-12), int(layers), shared, graph), (ran, sampled)
        results = json.loads((Path(job["dir"]) / "results.json").read_text())
        assert results["graph"] == graph  # and it trained on that graph
        assert job["value"] == results["best_val_acc"]  # the objective is the run's best validation accuracy
    assert len(set(points)) == 3  # three points searched, not one tried three times
    found = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    best = max(range(3), key=lambda i: jobs[i]["value"])
    assert found["best_value"] == jobs[best]["value"]
    assert {k: str(v).lower() for k, v in found["best_params"].items()} == dict(points[best])
