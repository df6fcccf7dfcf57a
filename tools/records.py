"""Slim per-run records, committed: ``docs/results/runs/<experiment>.jsonl``, one JSON line per run.

``make experiment E=x`` (``tools.experiment``) reads every run directory under ``multirun/x`` and writes
one line per run here; the table ``docs/results/x.md`` and its figures are then drawn from these lines,
never from the run directories, so the table stays checkable after ``multirun/`` is gone:
``python -m tools.check_docs`` renders every ``runs/<name>.jsonl`` again and compares it byte for byte
with ``docs/results/<name>.md`` (``runs/small/<name>.jsonl`` -> ``docs/results/small/<name>.md``).

A line holds what the table and figures show and no more (a few kB):

- ``overrides``: the run's command-line overrides (``.hydra/overrides.yaml``) without the ones that do
  not change a result (``trainer.progress``, ``trainer.resume``, ...), sorted; ``seed``; ``commit``:
  ``git rev-parse HEAD`` when ``make experiment`` started the runs (``+dirty`` with uncommitted changes to
  tracked files; a run that was not rerun keeps the commit of its line);
- ``model``, ``graph``, ``device``, ``epochs``, ``num_params``;
- ``best_val_acc``, ``best_epoch``, ``test_acc`` and the breakdowns (``test_by_depth``, ``test_by_length``,
  ``test_by_root``) exactly as ``results.json`` has them;
- ``test_predictions``: which test examples the run got right, a bit each, with the test split's fingerprint
  (``engine.evaluation.encode_correct``; 1,250 bytes for ListOps' 10,000), so that two cells scored on the same
  test set are compared example by example (``tools.stats``); records written before it have none;
- ``curve``: per epoch, ``epoch``, ``val_acc`` and ``train_loss`` from ``metrics.csv``;
- ``train_seconds``, ``examples_per_second``;
- ``config_digest``: a fingerprint of the config the run trained with (``.hydra/config.yaml``, less what does not
  change the computation: ``tools.run_config``), by which a run recorded under two experiments' names is known.

A rerun replaces its own lines and only those: a line is known by its ``overrides`` (seed included); lines
of runs not in this rerun stay. The file is written to a temporary file and renamed (``os.replace``).

    python -m tools.records multirun/sst_glove sst_glove   # write/refresh the records of these runs
    python -m tools.records ../other/multirun/heads heads   # runs another checkout trained, at its commit
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tools.run_config import digest_of_run  # what tools.share knows a run by

ROOT = Path(__file__).resolve().parents[1]
RUNS = Path("docs/results/runs")
# overrides that do not change what a run computes: left out of the record's key
NOT_SETTINGS = ("trainer.progress", "trainer.resume", "logger", "cluster", "dataset.data_dir", "hydra.")
KEPT = (
    "model",
    "graph",
    "device",
    "epochs",
    "num_params",
    "best_val_acc",
    "best_epoch",
    "test_acc",
    "test_predictions",
)
BREAKDOWNS = ("test_by_depth", "test_by_length", "test_by_root")


def path_of(name: str) -> Path:
    """``docs/results/runs/<name>.jsonl`` (``name`` may be ``small/<experiment>``)."""
    return ROOT / RUNS / f"{name}.jsonl"


def commit(where: Path | None = None) -> str:
    """The commit the working tree holding ``where`` (default: this checkout) is at, ``+dirty`` when tracked files
    differ from it; ``unknown`` off git."""
    cwd = where or ROOT
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=cwd).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty else "")


def key_of(overrides: list[str]) -> list[str]:
    """What identifies a run among its experiment's: the overrides that change a result, sorted."""
    return sorted(str(o) for o in overrides if not str(o).lstrip("+~").startswith(NOT_SETTINGS))


def overrides_of(run_dir: Path) -> list[str]:
    """The run's command-line overrides that change a result, sorted (``seed=`` among them)."""
    path = run_dir / ".hydra" / "overrides.yaml"
    return key_of(yaml.safe_load(path.read_text()) or []) if path.is_file() else []


def curve_of(run_dir: Path) -> list[dict]:
    """``[{"epoch", "val_acc", "train_loss"}, ...]`` from the run's ``metrics.csv`` (``[]`` without one)."""
    path = run_dir / "metrics.csv"
    if not path.is_file():
        return []
    with open(path) as f:
        return [
            {"epoch": int(m["epoch"]), "val_acc": float(m["val_acc"]), "train_loss": float(m["train_loss"])}
            for m in csv.DictReader(f)
        ]


def record_of(run_dir: Path, at: str) -> dict:
    """The slim record of one finished run (a directory holding ``results.json``)."""
    r = json.loads((run_dir / "results.json").read_text())
    record = {"overrides": overrides_of(run_dir), "seed": r.get("seed"), "commit": at}
    record.update({k: r[k] for k in KEPT if k in r})
    record.update({k: r[k] for k in BREAKDOWNS if r.get(k)})
    record["curve"] = curve_of(run_dir)
    if (config := digest_of_run(run_dir)) is not None:
        record["config_digest"] = config
    record["train_seconds"] = r.get("train_seconds", 0)
    record["examples_per_second"] = r.get("examples_per_second", 0)
    return record


def run_dirs(root: Path) -> list[Path]:
    """Every run directory below ``root`` (one with ``results.json``), in Hydra's job order (2 before 10)."""

    def job_order(path: Path):
        num = path.name.split("_")[0]
        return (str(path.parent), int(num) if num.isdigit() else -1, str(path))

    return sorted((p.parent for p in root.rglob("results.json")), key=job_order)


def read(name: str) -> list[dict]:
    """The records of ``name`` in file order (``[]`` when none are committed)."""
    path = path_of(name)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def identity(record: dict) -> tuple:
    """What one trained run is known by across files: a run copied under several experiments' names (``tools.share``)
    keeps its test accuracy and its training time, which no two trainings share."""
    return record.get("test_acc"), record.get("train_seconds")


def line_of(record: dict) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def write(name: str, new: list[dict]) -> Path:
    """Put ``new`` into ``runs/<name>.jsonl``: a record with the same overrides as an old one replaces it in
    place, the others are appended in the order given; every other old line stays as it was."""
    old = read(name)
    fresh = {tuple(r["overrides"]): r for r in new}
    if len(fresh) != len(new):
        raise ValueError(f"two runs of {name} have the same overrides; the records could not tell them apart")
    kept = [fresh.pop(tuple(r["overrides"]), r) for r in old]
    records = kept + [r for r in new if tuple(r["overrides"]) in fresh]
    path = path_of(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(line_of(r) + "\n" for r in records))
    os.replace(tmp, path)
    return path


def write_from_runs(root: Path, name: str, at: str | None = None) -> Path:
    """Records of every run directory below ``root`` into ``runs/<name>.jsonl`` (see ``write``); ``at``: the
    commit the runs ran at (default: now). A run whose record is unchanged but for the commit keeps its old
    line, so writing the records of runs that were not rerun changes nothing."""
    dirs = run_dirs(root)
    if not dirs:
        raise FileNotFoundError(f"no results.json under {root}; runs write one when they finish")
    at = at or commit()
    old = {tuple(r["overrides"]): r for r in read(name)}
    new = []
    for d in dirs:
        r = record_of(d, at)
        before = old.get(tuple(r["overrides"]))
        if before is not None and ({**before, "commit": at} == r or kept_more(before, r)):
            new.append(before)
        else:
            new.append(r)
    return write(name, new)


def kept_more(before: dict, run: dict) -> bool:
    """Does the committed record keep per-example test predictions that ``run``'s record (of an older run directory
    of the same overrides, or one trained before predictions were kept) lacks? Then the record stays: a copy
    (``tools.share``) or a retrain with predictions is not undone by gathering old run directories again."""
    return bool(before.get("test_predictions")) and not run.get("test_predictions")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a sweep directory (run directories with results.json below it)")
    parser.add_argument("name", help="the experiment: writes docs/results/runs/<name>.jsonl")
    parser.add_argument("--at", help="the commit the runs ran at (default: that of the checkout holding ROOT)")
    args = parser.parse_args(argv)
    if args.at:  # a commit of this repository, written out in full (a typo or a made-up one is refused)
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"{args.at}^{{commit}}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if found.returncode:
            print(
                f"error: --at {args.at}: no such commit in this repository; name the one its runs ran at",
                file=sys.stderr,
            )
            return 2
        args.at = found.stdout.strip()
    at = args.at or (commit(args.root) if args.root.is_dir() else None)  # no folder: write_from_runs says so
    if at == "unknown":
        print(f"error: {args.root} is in no git checkout: name the commit its runs ran at with --at", file=sys.stderr)
        return 2
    try:
        path = write_from_runs(args.root, args.name, at)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path.relative_to(ROOT)} ({len(read(args.name))} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
