"""A Hydra callback for tests/engine/test_sweeps.py: each job of a sweep appends its number, overrides, run directory
and return value (what the sweeper reports to Optuna as the trial's objective) to ``<sweep dir>/jobs.jsonl``.

Optuna's own record of the trials cannot be read back here: the in-memory study dies with the sweep, and
this venv's Optuna 2.10 cannot write its SQLite storage with SQLAlchemy 2.
"""

import json
from pathlib import Path

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback


class RecordJobs(Callback):
    def on_job_end(self, config, job_return, **kwargs) -> None:
        hydra = job_return.hydra_cfg.hydra
        done = job_return.status == JobStatus.COMPLETED
        row = {
            "num": int(hydra.job.num),
            "overrides": list(job_return.overrides),
            "dir": str(hydra.runtime.output_dir),
            "value": job_return.return_value if done else None,
        }
        with open(Path(hydra.sweep.dir) / "jobs.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
