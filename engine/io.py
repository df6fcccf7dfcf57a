"""Atomic writes: a file is either the old one or the whole new one, never half of either; and
``keep_committed``: a committed results file is not written over with fewer runs than it holds."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
from pathlib import Path

import torch


def _atomic(path: str | os.PathLike, write) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # disk full, read-only, quota: the old file stays as it was
        Path(tmp).unlink(missing_ok=True)
        raise OSError(
            e.errno,
            f"cannot write {path}: {e.strerror or e}; free some space or write elsewhere "
            "(hydra.run.dir=...); the previous file, if any, is intact",
        ) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: str | os.PathLike, obj) -> Path:
    return _atomic(path, lambda f: f.write((json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()))


def write_text(path: str | os.PathLike, text: str) -> Path:
    return _atomic(path, lambda f: f.write(text.encode()))


def save_torch(path: str | os.PathLike, obj) -> Path:
    return _atomic(path, lambda f: torch.save(obj, f))


def write_csv(path: str | os.PathLike, rows: list[dict], fieldnames: list[str] | None = None) -> Path:
    """Rows of dicts as CSV under ``fieldnames`` (default: the first row's keys) as the header."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(fieldnames or rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return _atomic(path, lambda f: f.write(text.getvalue().encode()))


def runs_in(folder: str | os.PathLike) -> int:
    """The finished runs a sweep folder holds (each with the ``results.json`` train.py writes at its end; a run
    still training, or one that crashed, has only ``.hydra/``); 0 when the folder is missing."""
    folder = Path(folder)
    return sum(1 for _ in folder.glob("*/results.json")) if folder.is_dir() else 0


def runs_committed(path: str | os.PathLike) -> int:
    """The finished runs a committed results file holds: a JSON's ``runs`` list (less those marked
    ``"finished": false``), or the ``(N runs, ...)`` that the first line of a ``tools.results_table`` table states;
    0 when the file is missing or says none."""
    path = Path(path)
    if not path.is_file():
        return 0
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        runs = data.get("runs", []) if isinstance(data, dict) else []
        return sum(1 for r in runs if not (isinstance(r, dict) and r.get("finished") is False))
    first = path.read_text().partition("\n")[0]
    found = re.search(r"\((\d+) runs, ", first) if first.startswith("Produced by ") else None
    return int(found.group(1)) if found else 0


def keep_committed(committed: str | os.PathLike, found: int, where: str | os.PathLike, fix: str) -> None:
    """Stop, before anything is written, when ``found`` runs (of ``where``) would be written over ``committed``,
    which holds more: a checkout without the run directories (a fresh clone: ``multirun/`` is not committed) would
    otherwise replace the committed results with fewer runs, or none. One line, naming ``fix``."""
    kept = runs_committed(committed)
    if found < kept:
        raise SystemExit(f"error: {where} holds {found} runs, {committed} {kept}: {fix}")


def keep_study_runs(out: str | os.PathLike, runs: str | os.PathLike, experiment: str) -> None:
    """``keep_committed`` for a study that draws ``<out>/<experiment>.json`` from the run folder ``runs`` and has a
    ``--table-only`` switch that draws it from the committed runs instead."""
    keep_committed(
        Path(out) / f"{experiment}.json",
        runs_in(runs),
        runs,
        "add --table-only to draw the table from the committed runs "
        f"(or train them here first: make experiment E={experiment})",
    )
