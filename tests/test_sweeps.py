"""Hyperparameter search: Hydra's Optuna sweeper maximises what train.py returns (best val accuracy)."""

import json

import yaml

from tests.conftest import run_script


def test_three_trial_optuna_sweep(tmp_path):
    run_script(
        "train.py",
        "-m",
        "hparams_search=listops_optuna",
        "debug=tiny",
        "hydra.sweeper.n_trials=3",
        f"hydra.sweep.dir={tmp_path}",
    )
    runs = [json.loads(p.read_text()) for p in tmp_path.glob("*/results.json")]
    assert len(runs) == 3
    found = yaml.safe_load((tmp_path / "optimization_results.yaml").read_text())
    assert found["best_value"] == max(r["best_val_acc"] for r in runs)
    assert set(found["best_params"]) == {"optim.lr", "model.num_layers", "model.share_weights", "graph"}
    assert 0.0003 <= found["best_params"]["optim.lr"] <= 0.003
