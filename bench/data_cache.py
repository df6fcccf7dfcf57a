"""Data built once: how long a run waits for its data, the first time and when the cache has it.

    python -m bench.data_cache                          # dataset=listops_full: ~6 min on 2 cores, mostly the first run
    python -m bench.data_cache --dataset listops --runs 2

Runs train.py's data stage (``train.build_data``: splits, vocabulary, graphs, loaders) in fresh processes
against an empty cache folder (``TAGNN_CACHE_DIR``, data/cache.py): the first run builds and writes, the
later ones read. Each reports its ``data: ... in X s`` line and the time of one pass over the training
batches (on a run that read the cache, the graphs are made as that pass reaches them). Writes
``data_cache.md`` to ``--out`` (default bench/results/<machine>/).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import invocation, machine_slug, results_dir  # noqa: E402

CHILD = """
import json, sys, time, torch
sys.path.insert(0, {root!r})
from hydra import compose, initialize_config_dir
import train
from engine.distributed import SINGLE
from engine.config import check_config
with initialize_config_dir(config_dir={conf!r}, version_base="1.3"):
    cfg = compose("config", overrides={overrides!r})
t = time.perf_counter()
data = train.build_data(check_config(cfg), (torch.device("cpu"), torch.device("cpu")), SINGLE)
ready = time.perf_counter() - t
t = time.perf_counter()
batches = sum(1 for _ in data.train_loader)
print(json.dumps({{"data_s": ready, "first_pass_s": time.perf_counter() - t, "batches": batches,
                   "sizes": {{s: len(d) for s, d in data.sets.items()}}}}))
"""


def one_run(overrides: list[str], cache: Path) -> dict:
    code = CHILD.format(root=str(ROOT), conf=str(ROOT / "conf"), overrides=overrides)
    env = {**os.environ, "TAGNN_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"error: the data stage failed: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def folder_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="listops_full")
    p.add_argument("--graph", default="complete")
    p.add_argument("--runs", type=int, default=3, help="the first builds, the others read the cache")
    p.add_argument("--machine", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    import torch

    out = results_dir(args, torch.device("cpu"))
    overrides = [f"dataset={args.dataset}", f"graph={args.graph}", "logger=none", "trainer.progress=false"]
    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            rows.append(one_run(overrides, Path(tmp)))
            print(
                f"run {i + 1}: data {rows[-1]['data_s']:.1f} s, first pass {rows[-1]['first_pass_s']:.1f} s", flush=True
            )
        size = folder_mib(Path(tmp))
    command = invocation("data_cache", argv)
    lines = [
        "# Data built once: the data stage, first run and runs that read the cache",
        "",
        f"`{command.strip()}` on {machine_slug(torch.device('cpu'))} ({os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f} at the end): {time.perf_counter() - start:.0f} s. `{' '.join(overrides)}`, "
        f"splits {rows[0]['sizes']}; each run a fresh process on the same, at first empty, cache folder "
        f"({size:.0f} MiB when done).",
        "",
        "| run | cache | data ready (s) | one pass over the training batches (s) |",
        "|---|---|---|---|",
    ]
    for i, r in enumerate(rows):
        lines.append(
            f"| {i + 1} | {'built and written' if i == 0 else 'read'} | {r['data_s']:.1f} | {r['first_pass_s']:.1f} |"
        )
    out.mkdir(parents=True, exist_ok=True)
    (out / "data_cache.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
