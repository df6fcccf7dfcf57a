"""W&B works with no network: offline runs are written and read back; disabled writes nothing."""

import pytest

from engine.tracking import read_offline_run, resolve_mode
from tests.conftest import compose_config
from train import run


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "empty-netrc"))
    (tmp_path / "empty-netrc").write_text("")


def test_mode_resolution(no_credentials, monkeypatch):
    assert resolve_mode("auto") == "offline"
    assert resolve_mode("disabled") == "disabled"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert resolve_mode("auto") == "online"
    monkeypatch.setenv("WANDB_MODE", "offline")  # the environment wins
    assert resolve_mode("auto") == "offline"
    with pytest.raises(ValueError, match="valid: auto, online, offline, disabled"):
        resolve_mode("loud")


def test_offline_run_is_readable(no_credentials, tmp_path):
    cfg = compose_config(["debug=tiny", "trainer.progress=false", "logger.mode=auto", "trainer.log_every=1"])
    out = tmp_path / "run"
    results = run(cfg, out)
    assert results["wandb_mode"] == "offline"
    run_dirs = list((out / "wandb").glob("offline-run-*"))
    assert len(run_dirs) == 1
    logged = read_offline_run(run_dirs[0])
    keys = set().union(*logged["history"])
    assert {"train/loss", "train/lr", "train/grad_norm", "val/acc", "train/examples_per_second"} <= keys
    val_accs = [row["val/acc"] for row in logged["history"] if "val/acc" in row]
    assert len(val_accs) == cfg.trainer.max_epochs
    assert max(val_accs) == pytest.approx(results["best_val_acc"])
    assert logged["summary"]["test/acc"] == pytest.approx(results["test_acc"])
    assert logged["summary"]["model/num_params"] == results["num_params"]
    assert logged["config"]["model"]["name"] == "transformer"


def test_disabled_writes_nothing(no_credentials, tmp_path):
    out = tmp_path / "run"
    results = run(compose_config(["debug=tiny", "trainer.progress=false", "logger=none"]), out)
    assert results["wandb_mode"] == "disabled"
    assert not (out / "wandb").exists()


def test_a_record_still_being_written_reads_as_not_finished(tmp_path):
    """finish() polls the offline file for its exit record while W&B writes it; a half-written record must read
    as "not yet", not stop the run (seen once under load: DecodeError out of Tracker.finish)."""
    import struct

    from engine.tracking import _has_exit_record

    path = tmp_path / "run-x.wandb"
    path.write_bytes(b":W&B\x00\x00\x00" + struct.pack("<IHB", 0, 6, 1) + b"\xff" * 6)  # one full chunk, garbage
    assert _has_exit_record(path) is False
    assert _has_exit_record(tmp_path / "missing.wandb") is False
