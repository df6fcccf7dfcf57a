"""Markdown tables: read them out of a page, and write their rows (what the checks and the table writers share).

``tables(path)`` is the one parser of the repository's pages (``tools.check_docs`` resolves references with it,
``tools.headline`` reads the headline numbers with it); ``row`` and ``rule`` write a table's lines;
``table_rows`` and ``generated_part`` are the views of a page that ``tools.replay`` and ``tools.seals`` compare.
"""

from __future__ import annotations

import re
from pathlib import Path

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")  # a number as a cell writes it (after "−" is read as "-")


def cells(line: str) -> list[str]:
    """The cells of a table row, stripped: ``| a | b |`` -> ``['a', 'b']``."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def is_rule(cells_: list[str]) -> bool:
    """Is this row the line under a table's header (``|---|:--:|``)?"""
    return all(set(c) <= set("-: ") for c in cells_)


def tables(path: Path) -> list[tuple[str, list[tuple[int, list[str]]]]]:
    """Every markdown table of a file: (the bold title or text line above it, [(line number, cells)])."""
    out, title, rows = [], "", []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.startswith("|"):
            found = cells(line)
            if not is_rule(found):
                rows.append((number, found))
            continue
        if rows:
            out.append((title, rows))
            rows = []
        if line.strip():
            title = line.strip()
    if rows:
        out.append((title, rows))
    return out


def row(values: list[str]) -> str:
    """One table row: ``| a | b |``."""
    return "| " + " | ".join(values) + " |"


def rule(columns: int) -> str:
    """The line under a header of ``columns`` columns: ``|---|---|``."""
    return "|" + "---|" * columns


def table_rows(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of every table row of a markdown file."""
    return [(k, line) for k, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("|")]


def generated_part(lines: list[str]) -> list[str]:
    """The lines above the first ``## `` heading, trailing blank lines dropped."""
    end = next((k for k, line in enumerate(lines) if line.startswith("## ")), len(lines))
    part = lines[:end]
    while part and not part[-1].strip():
        part.pop()
    return part
