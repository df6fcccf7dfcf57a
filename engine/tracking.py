"""Weights & Biases, with no surprises offline.

``logger.mode``:
  auto      online when credentials exist (``WANDB_API_KEY`` or a netrc entry), else offline,
            with a one-line notice; ``WANDB_MODE`` in the environment wins over both.
  online / offline / disabled   as W&B means them.
``logger=none`` sets ``disabled``. An online start that fails (no network) falls back to offline.
Offline runs live in ``<run dir>/wandb/offline-run-*``: ``wandb sync <that dir>`` uploads one;
:func:`read_offline_run` reads one back here.
"""

from __future__ import annotations

import json
import logging
import netrc
import os
import struct
import time
from pathlib import Path

log = logging.getLogger(__name__)
MODES = ("auto", "online", "offline", "disabled")


def has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("://")[-1].split("/")[0]
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def resolve_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown logger.mode {mode!r}; valid: {', '.join(MODES)}")
    env = os.environ.get("WANDB_MODE")
    if env in ("online", "offline", "disabled", "dryrun", "run"):
        return {"dryrun": "offline", "run": "online"}.get(env, env)
    if mode != "auto":
        return mode
    if has_credentials():
        return "online"
    log.info("W&B: no credentials found, logging offline (run `wandb login`, or logger=none to turn it off)")
    return "offline"


class Tracker:
    """A thin wrapper: ``log(metrics, step)``, ``summary(dict)``, ``finish()``; no-ops when disabled."""

    def __init__(self, logger_cfg: dict, config: dict, out_dir: str | os.PathLike, run_id: str | None = None):
        self.run = None
        self.mode = resolve_mode(logger_cfg.get("mode", "auto"))
        if self.mode == "disabled":
            return
        import wandb

        kwargs = dict(
            project=logger_cfg.get("project", "tagnn"),
            entity=logger_cfg.get("entity"),
            group=logger_cfg.get("group"),
            tags=list(logger_cfg.get("tags") or []),
            name=logger_cfg.get("run_name"),
            config=config,
            dir=str(out_dir),
            id=run_id,  # a resumed training run continues its W&B run
            resume="allow" if run_id else None,
            settings=wandb.Settings(init_timeout=float(logger_cfg.get("init_timeout", 60)), console="off"),
        )
        try:
            self.run = wandb.init(mode=self.mode, **kwargs)
        except Exception as e:  # an unreachable server must not stop training
            if self.mode != "online":
                raise
            log.warning("W&B: online start failed (%s); logging offline instead", str(e).splitlines()[0])
            self.mode = "offline"
            self.run = wandb.init(mode="offline", **kwargs)
        self.run.define_metric("val/acc", summary="max")

    @property
    def run_id(self) -> str | None:
        return self.run.id if self.run is not None else None

    def log(self, metrics: dict, step: int) -> None:
        if self.run is not None:
            self.run.log(metrics, step=step)

    def summary(self, values: dict) -> None:
        if self.run is not None:
            self.run.summary.update(values)

    def finish(self, exit_code: int = 0, timeout: float = 10.0) -> None:
        """Close the run. Offline, wait until its log holds the exit record: wandb-core writes
        asynchronously, and a run read back (or synced) right after ``finish`` must be whole."""
        if self.run is None:
            return
        run, self.run = self.run, None
        run.finish(exit_code=exit_code)
        if self.mode == "offline":
            path = Path(run.dir).parent / f"run-{run.id}.wandb"
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and not _has_exit_record(path):
                time.sleep(0.05)


def _records(path: Path):
    """The protobuf records of a ``.wandb`` file: W&B's 7-byte header, then LevelDB-style log
    blocks of 32 KiB whose chunks carry ``wandb_internal_pb2.Record`` messages."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, pos, buf = path.read_bytes(), 32768, 7, b""
    if not data.startswith(b":W&B"):
        raise ValueError(f"{path} is not a W&B run file")
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # block trailer too short for a header: padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pos += 7
        if kind == 0 and length == 0:
            pos += block - pos % block
            continue
        buf = data[pos : pos + length] if kind in (1, 2) else buf + data[pos : pos + length]
        pos += length
        if kind in (1, 4):  # a whole record, or the last chunk of one
            record = pb.Record()
            record.ParseFromString(buf)
            yield record


def _has_exit_record(path: Path) -> bool:
    """Has W&B written the run's exit record yet? A record still being written reads as corrupt: not yet."""
    from google.protobuf.message import DecodeError

    try:
        return any(r.WhichOneof("record_type") == "exit" for r in _records(path))
    except (OSError, ValueError, DecodeError):
        return False


def read_offline_run(run_dir: str | os.PathLike) -> dict:
    """``{"history": [row, ...], "summary": {...}, "config": {...}}`` of an offline run directory."""
    run_dir = Path(run_dir)
    files = sorted(run_dir.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {run_dir}")

    def key(item):
        return item.key or "/".join(item.nested_key)

    out = {"history": [], "summary": {}, "config": {}}
    for r in _records(files[0]):
        kind = r.WhichOneof("record_type")
        if kind == "history":
            out["history"].append({key(i): json.loads(i.value_json) for i in r.history.item})
        elif kind == "summary":
            out["summary"].update({key(i): json.loads(i.value_json) for i in r.summary.update})
        elif kind in ("config", "run"):
            items = r.config.update if kind == "config" else r.run.config.update
            out["config"].update({key(i): json.loads(i.value_json) for i in items})
    return out
