"""Data built once: files on disk, keyed by everything that determines their content, checked when read.

Generated ListOps splits (``data/listops.py``) and the graphs of every split (``data/graph_cache.py``, for
``data.graph_dataset.GraphDataset``) are written here by the first run that builds them and read by every later run and sweep job with the
same key. Where: ``dataset.cache_dir`` when the config sets it (``null`` turns caching off), else the
environment variable ``TAGNN_CACHE_DIR`` (empty: off), else ``.cache/tagnn`` under the working directory
(ignored by git). Delete the folder to reclaim the space; nothing else refers to it.

A cache file is one header line, ``tagnn-cache 1 <payload bytes> <sha256 of the payload>``, then the
payload. It is written to a temporary file in the same folder and renamed into place (``os.replace``), so
parallel jobs never read half a file; a file whose length or checksum does not match its header
(truncated, corrupted, or from another format) is rebuilt after one warning, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "TAGNN_CACHE_DIR"
DEFAULT = ".cache/tagnn"
MAGIC = b"tagnn-cache 1"


def cache_root(dataset_cfg: Mapping | None = None) -> Path | None:
    """Where a dataset's built data lives, or None when caching is off (see the module's docstring)."""
    if dataset_cfg is not None and "cache_dir" in dataset_cfg:
        value = dataset_cfg["cache_dir"]
        return Path(value) if value else None
    value = os.environ.get(ENV, DEFAULT)
    return Path(value) if value else None


def key_digest(*parts) -> str:
    """A short stable hash of JSON-able ``parts`` (dict keys sorted): the name of what they determine."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def tmp_sibling(path: Path) -> Path:
    """A temporary name beside ``path`` that no other process or call picks (pid + random): two jobs
    building the same file at once each write their own, and neither deletes or appends to the other's."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def write(path: Path, payload: bytes) -> None:
    """``payload`` to ``path`` under a checked header, atomically (tmp file + ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = MAGIC + b" %d %s\n" % (len(payload), hashlib.sha256(payload).hexdigest().encode())
    tmp = tmp_sibling(path)
    try:
        with open(tmp, "wb") as f:
            f.write(header)
            f.write(payload)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read(path: Path, what: str) -> bytes | None:
    """The payload of the cache file ``path``: None when it is absent, and None with one warning when it is
    damaged (``what`` names it in the warning); the caller then builds the data again and rewrites it."""
    try:
        with open(path, "rb") as f:
            head = f.readline(200).rstrip(b"\n")
            payload = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("%s cache %s unreadable (%s): building it again", what, path, e)
        return None
    fields = head.split(b" ")
    problem = None
    if len(fields) != 4 or b" ".join(fields[:2]) != MAGIC or not fields[2].isdigit():
        problem = "not a tagnn cache file"
    elif int(fields[2]) != len(payload):
        problem = f"{len(payload)} bytes, its header says {int(fields[2])}: truncated"
    elif hashlib.sha256(payload).hexdigest().encode() != fields[3]:
        problem = "checksum mismatch: corrupted"
    if problem:
        log.warning("%s cache %s is damaged (%s): building it again", what, path, problem)
        return None
    return payload
