"""What every benchmark needs to know about the machine it runs on: its device, its name, where its results go,
and what it cannot run (said in one line each, then skipped).

Results are written per machine, ``bench/results/<machine>/``, so the CPU tables and a GPU's sit side by
side and neither overwrites the other. ``<machine>`` is ``cpu-<cores>core`` on the CPU (the cores this
process may use) and the GPU's model on CUDA (``nvidia-h100``); ``--machine`` overrides it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import torch

from engine import placement

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def pick_device(name: str) -> torch.device:
    """The device, as a training run picks it (``engine.placement.pick_device``: ``auto`` takes CUDA when torch
    sees a GPU); a device that cannot be had stops the benchmark with one line."""
    try:
        return placement.pick_device(name)
    except ValueError as e:
        raise SystemExit(f"error: --device {name}: {e}") from None


def machine_slug(device: torch.device) -> str:
    """``cpu-2core`` | ``nvidia-h100``: the folder a machine's results go to."""
    if device.type == "cuda":
        words = torch.cuda.get_device_name(device).split()  # "NVIDIA H100 80GB HBM3"
        return "-".join(w.split("-")[0] for w in words[:2]).lower()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"cpu-{cores}core"


def invocation(module: str, argv: list[str] | None) -> str:
    """The command line a results file names: ``python -m bench.<module>`` and the arguments it was given."""
    return " ".join(["python -m bench." + module, *(sys.argv[1:] if argv is None else argv)])


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--device``, ``--machine`` and ``--out`` (default ``bench/results/<machine>/``)."""
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--machine", default=None, help="the results folder's name (default: cpu-<cores>core | nvidia-h100)")
    p.add_argument("--out", default=None, help="where results go (default: bench/results/<machine>/)")


def results_dir(args, device: torch.device) -> Path:
    """``--out``, else ``bench/results/<--machine or the machine's slug>/``."""
    if args.out:
        return Path(args.out)
    name = args.machine or machine_slug(device)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise SystemExit(f"error: --machine {name!r}: use letters, digits, '.', '_' and '-' only")
    return RESULTS / name


def sparse_available(device: torch.device) -> bool:
    """Whether DGL's message passing runs on ``device``: the placement decision a training run reads
    (``engine.placement.sparse_available``: always on the CPU; on a GPU only with DGL's CUDA build)."""
    return placement.sparse_available(device)


def sparse_skip_line(device: torch.device, instead: str = "") -> str:
    """The one line a benchmark prints when DGL cannot run on ``device``."""
    line = f"skipped: DGL message passing (impl=sparse) on {device.type}: this DGL build is CPU-only (PyPI ships no CUDA build)"
    return line + (f"; {instead}" if instead else "")
