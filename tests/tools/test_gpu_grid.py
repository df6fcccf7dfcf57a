"""tools/gpu_grid.sh, run here with a stand-in for tools.experiment: finished runs come back without their
checkpoints; at the time limit the runs still training are stopped and come back with theirs, to go on elsewhere."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# "python -m tools.experiment E ...": one run finished, one with a checkpoint still training (its child sleeps, the
# way a training process outlives the timeout that stops its parent), and a third finished later than the limit
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-c" ]; then echo "torch (stand-in)"; exit 0; fi
mkdir -p multirun/e/seed=0/checkpoints multirun/e/seed=1/checkpoints
echo '{"test_acc": 0.5}' > multirun/e/seed=0/results.json
echo weights > multirun/e/seed=0/checkpoints/last.pt
echo epoch,loss > multirun/e/seed=1/metrics.csv
head -c 400000 /dev/urandom > multirun/e/seed=1/checkpoints/last.pt
head -c 400000 /dev/urandom > multirun/e/seed=1/checkpoints/best.pt
mkdir -p multirun/e/seed=2/checkpoints multirun/e/seed=3/checkpoints
head -c 700000 /dev/urandom > multirun/e/seed=2/checkpoints/last.pt
head -c 1500000 /dev/urandom > multirun/e/seed=3/checkpoints/last.pt
bash -c 'echo $$ > child.pid; sleep 60; echo "{}" > multirun/e/seed=1/results.json' &
wait
"""


def members(path: Path) -> set[str]:
    with tarfile.open(path) as t:
        return {m.name for m in t.getmembers() if m.isfile()}


def test_a_grid_cut_off_at_its_limit_brings_back_finished_runs_and_the_others_checkpoints(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    env = {**os.environ, "OUT": str(out), "PYTHON": str(fake), "LIMIT": "4", "JOBS": "2", "PACK_MB": "1"}
    t0 = time.monotonic()
    res = subprocess.run(
        ["bash", str(ROOT / "tools" / "gpu_grid.sh"), "e"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - t0 < 30  # the limit stopped it, not the 60 s run
    assert members(out / "grid.tgz") == {"multirun/e/seed=0/results.json"}  # finished, no checkpoint
    # 1 MiB a file (PACK_MB=1): seed 1 (0.8 MB) and seed 2 (0.7 MB) go to two files; seed 3 (1.5 MB) fits none
    assert members(out / "unfinished-0.tgz") == {
        "multirun/e/seed=1/metrics.csv",
        "multirun/e/seed=1/checkpoints/last.pt",
        "multirun/e/seed=1/checkpoints/best.pt",
    }
    assert members(out / "unfinished-1.tgz") == {"multirun/e/seed=2/checkpoints/last.pt"}
    assert not (out / "unfinished-2.tgz").exists()
    assert all(p.stat().st_size <= 2**20 for p in out.glob("unfinished-*.tgz"))
    time.sleep(1)
    pid = int((work / "child.pid").read_text())
    assert not Path(f"/proc/{pid}").exists(), "a run still training outlived the grid's limit"
    log = (out / "experiment.log").read_text()
    assert "unfinished runs packed into 2 file(s)" in log and "warning: multirun/e/seed=3 is 15" in log
