"""torchrun with 2 CPU processes (gloo): sharded batches, averaged gradients, one writer."""

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data.pipeline import TrainBatches
from tests.conftest import ROOT, compose_config, run_script
from train import run


@pytest.mark.parametrize("bucket", [True, False])
def test_batches_are_shared_out_evenly(bucket):
    lengths = [(i * 7) % 23 + 1 for i in range(103)]
    one = TrainBatches(lengths, 8, seed=3, bucket=bucket)
    shares = [TrainBatches(lengths, 8, seed=3, bucket=bucket, rank=r, world=3) for r in range(3)]
    whole = list(one)
    parts = [list(s) for s in shares]
    assert [len(p) for p in parts] == [len(s) for s in shares] == [len(shares[0])] * 3  # equal shares
    seen = sorted(i for p in parts for b in p for i in b)
    assert set(seen) == set(range(103))  # every example, some repeated only to even the shares
    assert [b for p in zip(*parts) for b in p][: len(whole)] == whole  # rank r takes every 3rd batch
    assert len(one) == len(whole)


def test_torchrun_two_processes(tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        torchrun = shutil.which("torchrun")
    overrides = ["debug=tiny", "trainer.progress=false", "logger=none", "trainer.max_epochs=4", "optim.lr=3e-3"]
    res = subprocess.run(
        [str(torchrun), "--nproc_per_node=2", "train.py", *overrides, f"hydra.run.dir={tmp_path / 'ddp'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    ddp = json.loads((tmp_path / "ddp" / "results.json").read_text())
    single = run(compose_config(overrides), tmp_path / "single")
    with open(tmp_path / "ddp" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"])  # it learns, as one process does
    assert int(rows[-1]["step"]) == single["num_examples"]["train"] // 32 // 2 * 4  # each rank: half the batches
    assert ddp["num_params"] == single["num_params"] and ddp["epochs"] == single["epochs"]
    assert abs(ddp["test_acc"] - single["test_acc"]) <= 0.15
    log = (tmp_path / "ddp" / "train.log").read_text()
    assert log.count("epoch 1:") == 1  # rank 0 alone logs and writes


def test_cluster_launchers_compose_and_run_locally(tmp_path):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["cluster=slurm", "hydra.launcher.partition=gpu"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher") and cfg.hydra.launcher.partition == "gpu"
    run_script(
        "train.py",
        "-m",
        "cluster=local",
        "debug=tiny",
        "trainer.progress=false",
        "model=gcn,gat",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert sorted(p.parent.name for p in tmp_path.glob("*/results.json")) == ["0_gcn_complete", "1_gat_complete"]


def test_wandb_sweep_keys_all_exist():
    import yaml

    sweep = yaml.safe_load((ROOT / "sweep.yaml").read_text())
    assert "${args_no_hyphens}" in sweep["command"] and sweep["program"] == "train.py"
    for key, spec in sweep["parameters"].items():
        value = spec["values"][-1] if "values" in spec else spec["min"]
        cfg = compose_config([f"{key}={str(value).lower() if isinstance(value, bool) else value}"])
        assert cfg is not None
    assert compose_config(["logger.mode=online"]).logger.mode == "online"
