"""Atomic writes: a file is either the old one or the whole new one, never half of either."""

from __future__ import annotations

import csv
import io
import json
import os
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
