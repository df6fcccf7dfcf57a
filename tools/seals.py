"""Sealed tables: a table under ``docs/results`` whose per-run data is lost, held to a copy of its rows.

A table whose runs were never committed (its ``multirun/`` directories gone) says so in its header, above its
first table (``per-run records not committed; rerun: `...` ``), and ``tools.check_docs`` holds every table row
of it (every line starting with ``|``) to the copy taken when the records were found missing,
``docs/results/runs/unrecorded.json``. A hand edit fails; only rerunning it (which writes its records and
drops its seal: ``unseal``) changes it. ``python -m tools.check_docs --seal T 'RERUN'`` seals a table
(``seal``); ``check_docs`` prints how many are still sealed. Every other table is replayed (``tools.replay``).
"""

from __future__ import annotations

import json
from pathlib import Path

from tools.markdown import table_rows

RESULTS = Path("docs/results")
SEALED = RESULTS / "runs" / "unrecorded.json"
NOTE = "per-run records not committed; rerun: "


def read_sealed(root: Path) -> dict:
    """The sealed tables of the repository at ``root``: ``{table: {"note": ..., "rows": [...]}}``."""
    path = root / SEALED
    return json.loads(path.read_text()) if path.is_file() else {}


def check_sealed(root: Path, replayed: set[str]) -> list[str]:
    """Every table under docs/results is replayed or sealed; a sealed one has its note and its rows."""
    problems, sealed = [], read_sealed(root)
    for table in sorted((root / RESULTS).rglob("*.md")):
        rel = str(table.relative_to(root))
        if rel in replayed:
            if rel in sealed:
                problems.append(f"{SEALED}: {rel} is replayed from its records now; drop its seal")
            continue
        if rel not in sealed:
            problems.append(
                f"{rel}: neither replayed nor sealed: commit its per-run records (make experiment) or seal it "
                f"(python -m tools.check_docs --seal {rel} 'RERUN COMMAND')"
            )
            continue
        note, lines = sealed[rel]["note"], table.read_text().splitlines()
        header = lines[: next((k for k, line in enumerate(lines) if line.startswith("|")), len(lines))]
        if not any(note in line for line in header):
            problems.append(f"{rel}:1: the header (above the first table) must say {note!r}")
        have, want = table_rows(table), sealed[rel]["rows"]
        for k in range(max(len(have), len(want))):
            line, a = have[k] if k < len(have) else (len(table.read_text().splitlines()), "(missing)")
            b = want[k] if k < len(want) else "(missing)"
            if a != b:
                problems.append(f"{rel}:{line}: has {a!r}, the sealed copy ({SEALED}) has {b!r}")
                break
    for rel in sealed:
        if not (root / rel).is_file():
            problems.append(f"{SEALED}: seals {rel}, which does not exist")
    return problems


def _write_sealed(root: Path, sealed: dict) -> None:
    path = root / SEALED
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(dict(sorted(sealed.items())), indent=1, ensure_ascii=False) + "\n")
    tmp.replace(path)


def seal(root: Path, rel: str, rerun: str) -> None:
    """Record the table rows of ``rel`` as they are now, with the note naming ``rerun``."""
    sealed = read_sealed(root)
    sealed[rel] = {"note": f"{NOTE}`{rerun}`", "rows": [text for _, text in table_rows(root / rel)]}
    _write_sealed(root, sealed)


def unseal(root: Path, rel: str) -> bool:
    """Drop the seal of ``rel`` (its records are committed now); True when there was one."""
    sealed = read_sealed(root)
    if rel not in sealed:
        return False
    del sealed[rel]
    _write_sealed(root, sealed)
    return True
