"""Test setup: no network, no W&B server, nothing written outside temp dirs.

These variables are read when wandb / datasets are imported, so they are set here, before any
test module imports them.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

_TMP = Path(tempfile.mkdtemp(prefix="tagnn-tests-"))
os.environ.update(
    {
        "WANDB_MODE": "disabled",
        "WANDB_DIR": str(_TMP / "wandb"),
        "WANDB_CACHE_DIR": str(_TMP / "wandb-cache"),
        "WANDB_CONFIG_DIR": str(_TMP / "wandb-config"),
        "WANDB_SILENT": "true",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(_TMP / "hf"),
        "HF_DATASETS_CACHE": str(_TMP / "hf-datasets"),
        "DGLBACKEND": "pytorch",
        "MPLBACKEND": "Agg",
        "TAGNN_CACHE_DIR": str(_TMP / "tagnn-cache"),  # built data (data/cache.py), shared by this session's tests
    }
)

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"


def compose_config(overrides=(), config_name="config"):
    """The resolved config ``python train.py <overrides>`` would see (no Hydra run dir)."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=config_name, overrides=list(overrides))


@pytest.fixture
def tiny_overrides():
    """A training run of a few seconds that still learns something."""
    return ["debug=tiny", "trainer.progress=false", "logger=none"]


def run_script(script, *args, timeout=300):
    """``python <script> <args>`` from the repository root, as a user would type it; asserts it succeeded."""
    res = subprocess.run([sys.executable, script, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def assert_breakdowns_match_test_acc(results):
    """Every breakdown of the test split in ``results`` (by depth, length, root) counts the whole split, and its
    n-weighted mean accuracy is ``test_acc``: the overall number and the tables come from the same predictions."""
    tables = [results[k] for k in ("test_by_depth", "test_by_length", "test_by_root") if results.get(k)]
    assert tables, "results hold no breakdown of the test accuracy"
    for table in tables:
        n = sum(row["n"] for row in table.values())
        assert n == results["num_examples"]["test"], table
        assert sum(row["n"] * row["acc"] for row in table.values()) / n == pytest.approx(results["test_acc"], abs=1e-9)


def rescored_test_acc(run_dir, out_dir):
    """The test accuracy of ``run_dir``'s checkpoints/best.pt, scored afresh by evaluate.py (rebuilt model,
    rebuilt test split): what ``results.json``'s ``test_acc`` must equal, exactly."""
    from evaluate import evaluate

    cfg = compose_config([f"checkpoint={Path(run_dir) / 'checkpoints' / 'best.pt'}"], config_name="evaluate")
    return evaluate(cfg, out_dir)["accuracy"]
