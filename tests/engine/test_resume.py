"""Long runs survive: same seed -> same numbers, and a SIGKILLed run resumes to the very same result."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import train
from tests.conftest import ROOT, compose_config
from train import run

TIMING = {"examples_per_second", "seconds"}
OVERRIDES = [
    "debug=tiny",
    "trainer.progress=false",
    "logger=none",
    "dataset.num_train=512",
    "trainer.max_epochs=6",
    "model=gat",
    "graph=window",
]


def metrics(out_dir):
    with open(out_dir / "metrics.csv") as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def outcome(results):
    return {k: results[k] for k in ("best_val_acc", "best_epoch", "test_acc", "test_loss", "num_params")}


def test_same_seed_same_numbers(tmp_path):
    a = run(compose_config(OVERRIDES + ["trainer.max_epochs=2"]), tmp_path / "a")
    b = run(compose_config(OVERRIDES + ["trainer.max_epochs=2"]), tmp_path / "b")
    assert metrics(tmp_path / "a") == metrics(tmp_path / "b")
    assert outcome(a) == outcome(b) and a["test_by_depth"] == b["test_by_depth"]


def test_killed_run_resumes_to_the_same_result(tmp_path):
    reference = run(compose_config(OVERRIDES), tmp_path / "reference")

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "train.py", *OVERRIDES, f"hydra.run.dir={killed}", "trainer.resume=auto"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill it as soon as two epochs are on disk, mid-way through the third
        if (killed / "metrics.csv").is_file() and len((killed / "metrics.csv").read_text().splitlines()) >= 3:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    assert not (killed / "results.json").exists(), "the run finished before it could be killed"
    assert (killed / "checkpoints" / "last.pt").is_file()

    resumed = run(compose_config(OVERRIDES + ["trainer.resume=auto"]), killed)
    assert metrics(killed) == metrics(tmp_path / "reference")  # bitwise: CPU training is deterministic here
    assert outcome(resumed) == outcome(reference)
    assert json.loads((killed / "results.json").read_text())["test_acc"] == reference["test_acc"]


def test_resume_refuses_another_config(tmp_path):
    run(compose_config(OVERRIDES + ["trainer.max_epochs=1"]), tmp_path)
    with pytest.raises(ValueError, match="its model config differs"):
        run(compose_config(OVERRIDES + ["trainer.resume=auto", "model.hidden_dim=16"]), tmp_path)


def test_resume_auto_without_a_checkpoint_starts_fresh(tmp_path):
    results = run(compose_config(OVERRIDES + ["trainer.max_epochs=1", "trainer.resume=auto"]), tmp_path)
    assert results["epochs"] == 1 and len(metrics(tmp_path)) == 1


def test_a_resumed_run_keeps_its_earlier_epochs_on_disk_while_it_trains(tmp_path, monkeypatch):
    """What a kill during a resumed run's next epoch leaves of metrics.csv: the epochs before it. (Before, the
    file was truncated and its rows waited in a write buffer, so a kill there emptied it, and the next resume
    read no rows: an SST-5 phrase run lost its first epoch's curve that way.)"""
    first_epoch = train.train_epoch

    def stop_in_epoch_2(*args, **kwargs):
        if args[-2] == 2:  # the epoch argument
            raise KeyboardInterrupt
        return first_epoch(*args, **kwargs)

    monkeypatch.setattr(train, "train_epoch", stop_in_epoch_2)
    with pytest.raises(KeyboardInterrupt):
        run(compose_config(OVERRIDES + ["trainer.resume=auto"]), tmp_path)
    written = (tmp_path / "metrics.csv").read_text()
    assert len(written.splitlines()) == 2  # the header and epoch 1

    on_disk = []

    def killed_here(*args, **kwargs):
        on_disk.append((tmp_path / "metrics.csv").read_text())  # what SIGKILL at this moment would leave
        raise KeyboardInterrupt

    monkeypatch.setattr(train, "train_epoch", killed_here)
    with pytest.raises(KeyboardInterrupt):
        run(compose_config(OVERRIDES + ["trainer.resume=auto"]), tmp_path)
    assert on_disk == [written]
