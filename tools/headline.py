"""The headline tables: README's short one and ``docs/headline.md``'s full one, generated from
``docs/results/headline.json``.

The JSON names, for every number, the results file, table, row and column it is read from; ``write`` reads
those numbers into the JSON and rewrites README's short table (each row's ``short`` cells, one number per
cell) and ``docs/headline.md``'s full one (every number, with its tables and commands) between their
``<!-- headline:start -->`` and ``<!-- headline:end -->`` markers (``python -m tools.check_docs
--write-headline``; ``tools.experiment`` calls it when an experiment rewrote a table a number is read from).
``check`` reads every number again from its results file and compares it with the JSON, and both tables with
what the JSON renders, so a number changed by hand in any of them fails (``tools.check_docs`` runs it).
A row's ``chosen_on_validation`` names the cell its "best learned from scratch" is (``value``: the index of its
test mean among the row's values; ``chosen``: the same cell in a validation table) and the validation tables it
was chosen among (``among``: file, table title, optionally the rows); ``check`` fails when a cell of those with
at least ``min_seeds`` seeds (3 unless given) is higher on validation than the chosen one, so the choice is made
on validation and stays so when a table is written again.
Every function takes the repository's root, so the checks run on a copy as well.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tools.markdown import NUMBER, row, rule, tables

HEADLINE = Path("docs/results/headline.json")
DETAILS = Path("docs/headline.md")  # the headline table in full: every number, its legend, tables and commands
START, END = "<!-- headline:start -->", "<!-- headline:end -->"


class Problem(Exception):
    """A headline number that cannot be read: one line naming the file."""


def locate(root: Path, spec: dict) -> tuple[float, int]:
    """The number ``spec`` names (file, optional table title, row, column, index) and its line."""
    path = root / spec["file"]
    if not path.is_file():
        raise Problem(f"{HEADLINE}: {spec['file']} does not exist")
    for title, rows in tables(path):
        if spec.get("table") and spec["table"] not in title:
            continue
        header = rows[0][1]
        if spec["col"] not in header:
            continue
        col = header.index(spec["col"])
        for number, cells in rows[1:]:
            if cells[0].strip("*` ") == spec["row"]:
                found = NUMBER.findall(cells[col].replace("−", "-"))
                if len(found) <= spec.get("index", 0):
                    raise Problem(f"{spec['file']}:{number}: no number {spec.get('index', 0)} in {cells[col]!r}")
                return float(found[spec.get("index", 0)]), number
    where = f"table {spec['table']!r}, " if spec.get("table") else ""
    raise Problem(f"{spec['file']}: no row {spec['row']!r} in column {spec['col']!r} ({where}named in {HEADLINE})")


SEEDS = re.compile(r"\(n=(\d+)\)")  # a results table's seed count in a cell: "0.383 ± 0.001 (n=3)"


def validation_cells(root: Path, among: dict) -> list[tuple[str, str, float, int]]:
    """``(row, column, mean, seeds)`` of every cell of the validation table ``among`` names (its ``rows`` only,
    when given); a cell with no ``(n=K)`` is one seed, a cell with no number ("–") is left out."""
    path = root / among["file"]
    if not path.is_file():
        raise Problem(f"{HEADLINE}: {among['file']} does not exist")
    out = []
    for title, rows in tables(path):
        if among["table"] not in title:
            continue
        header = rows[0][1]
        seen = set()
        for _, cells in rows[1:]:
            name = cells[0].strip("*` ")
            if among.get("rows") and name not in among["rows"]:
                continue
            seen.add(name)
            for col, cell in zip(header[1:], cells[1:]):
                found = NUMBER.findall(cell.replace("−", "-"))
                if found:
                    seeds = SEEDS.search(cell)
                    out.append((name, col, float(found[0]), int(seeds.group(1)) if seeds else 1))
        missing = [r for r in among.get("rows") or [] if r not in seen]
        if missing:  # a misspelt candidate would leave the check with nothing to compare
            raise Problem(f"{HEADLINE}: {among['file']}'s table {among['table']!r} has no row {missing[0]!r}")
        return out
    raise Problem(f"{HEADLINE}: {among['file']} has no table {among['table']!r}")


def check_choice(root: Path, entry: dict) -> list[str]:
    """One line per way the row's ``chosen_on_validation`` cell is not the best on validation among its
    candidates (or is not the cell whose test mean the row shows)."""
    choice = entry.get("chosen_on_validation")
    if not choice:
        return []
    name, chosen = entry["task"], choice["chosen"]
    shown = entry["values"][choice["value"]]
    if (shown["file"], shown["row"], shown["col"]) != (chosen["file"], chosen["row"], chosen["col"]):
        return [
            f"{HEADLINE}: row {name!r}: value {choice['value']} ({shown['file']}: {shown['row']}, {shown['col']}) "
            f"is not the cell chosen on validation ({chosen['file']}: {chosen['row']}, {chosen['col']})"
        ]
    try:
        best, _ = locate(root, chosen)
        problems, compared = [], 0
        for among in choice["among"]:
            for row_, col, mean, seeds in validation_cells(root, among):
                compared += seeds >= choice.get("min_seeds", 3)
                if seeds >= choice.get("min_seeds", 3) and mean > best:
                    problems.append(
                        f"{HEADLINE}: row {name!r}: {among['file']} ({row_}, {col}) has {mean} on validation, "
                        f"above the chosen cell's {best} ({chosen['row']}, {chosen['col']}): choose on validation"
                    )
        if not compared:  # e.g. the tables lost their (n=K): the check would pass on nothing
            return [f"{HEADLINE}: row {name!r}: no candidate of {choice.get('min_seeds', 3)}+ seeds to choose among"]
        return problems
    except Problem as e:
        return [str(e)]


def formatted(spec: dict, value: float) -> str:
    return f"{value * spec.get('scale', 1):.{spec.get('digits', 1)}f}"


def _links(files: list[str], page: str, commands: dict[str, str] | None = None) -> str:
    """Links to results tables from ``page`` (README at the root, or a page under docs/), each with its command."""
    base = Path(page).parent
    out = []
    for file in files:
        target = Path(file).relative_to(base) if base != Path(".") else Path(file)
        command = f" (`{commands[file]}`)" if commands else ""
        out.append(f"[{Path(file).stem}]({target.as_posix()}){command}")
    return ", ".join(out)


def render_short(data: dict) -> list[str]:
    """README's short table: each row's ``short`` cells, one number (with its seeds) per cell."""
    lines = [row(data["short_columns"]), rule(len(data["short_columns"]))]
    for entry in data["rows"]:
        values, short = [v["value"] for v in entry["values"]], entry["short"]
        cells = [entry["task"], *(short[k].format(*values) for k in ("best", "transformer", "pretrained", "anchor"))]
        lines.append(row(cells + [_links(short["tables"], "README.md")]))
    return lines


def render_details(data: dict) -> list[str]:
    """The details page's table (DETAILS): every number of each row, its legend, its tables and commands."""
    lines = [row(data["columns"]), rule(len(data["columns"]))]
    for entry in data["rows"]:
        values = [v["value"] for v in entry["values"]]
        commands = {t["file"]: t["command"] for t in entry["tables"]}
        pretrained = entry.get("pretrained", "—").format(*values)  # GloVe inputs, the pretrained MiniLM
        cells = [
            entry["task"],
            entry["best"].format(*values),
            entry["transformer"].format(*values),
            pretrained,
            entry["anchor"],
            _links(list(commands), str(DETAILS), commands),
        ]
        lines.append(row(cells))
    return lines


RENDERED = {"README.md": render_short, str(DETAILS): render_details}  # page -> its table


def rewrite(root: Path, data: dict) -> None:
    """Write the tables ``data`` renders between the markers of README and the details page."""
    for page, render in RENDERED.items():
        lines = (root / page).read_text().splitlines()
        start, end = lines.index(START), lines.index(END)
        lines[start + 1 : end] = render(data)
        (root / page).write_text("\n".join(lines) + "\n")


def read(root: Path) -> dict:
    return json.loads((root / HEADLINE).read_text())


def write(root: Path) -> list[str]:
    """Read every headline number from its results file into headline.json, then rewrite README's table and
    the details page's; README's table as it is now."""
    data = read(root)
    for entry in data["rows"]:
        for spec in entry["values"]:
            value, _ = locate(root, spec)
            spec["value"] = formatted(spec, value)
    (root / HEADLINE).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    rewrite(root, data)
    return render_short(data)


def check(root: Path) -> list[str]:
    """One line per headline number that differs from its results file, per row that does not link the file a
    number of it is read from, and per line of the two tables that differs from what the JSON renders."""
    problems = []
    data = read(root)
    for entry in data["rows"]:
        linked = {t["file"] for t in entry["tables"]}
        for k, spec in enumerate(entry["values"]):
            if spec["file"] not in linked:
                problems.append(
                    f"{HEADLINE}: row {entry['task']!r}, value {k} is read from {spec['file']}, "
                    f"which the row does not link ({', '.join(sorted(linked))})"
                )
            try:
                value, line = locate(root, spec)
            except Problem as e:
                problems.append(str(e))
                continue
            if formatted(spec, value) != spec["value"]:
                problems.append(
                    f"{HEADLINE}: row {entry['task']!r} says {spec['value']}, "
                    f"{spec['file']}:{line} has {formatted(spec, value)}"
                )
        problems += check_choice(root, entry)
        short = entry.get("short", {})
        cited = {int(k) for cell in short.values() if isinstance(cell, str) for k in re.findall(r"\{(\d+)\}", cell)}
        for k in sorted(cited):  # README's short row links the table of every number it shows
            if k < len(entry["values"]) and entry["values"][k]["file"] not in short.get("tables", []):
                problems.append(
                    f"{HEADLINE}: row {entry['task']!r}, short value {k} is read from {entry['values'][k]['file']}, "
                    f"which the short row does not link"
                )
        for file in short.get("tables", []):
            if file not in linked:
                problems.append(f"{HEADLINE}: row {entry['task']!r}, short table {file} is not one of the row's tables")
    for page, render in RENDERED.items():
        if not (root / page).is_file():
            problems.append(
                f"{page}: missing (it holds a headline table: `python -m tools.check_docs --write-headline`)"
            )
            continue
        lines = (root / page).read_text().splitlines()
        if START not in lines or END not in lines:
            problems.append(f"{page}: no {START} ... {END} markers around the headline table")
            continue
        start, end = lines.index(START), lines.index(END)
        have, want = lines[start + 1 : end], render(data)
        for k in range(max(len(have), len(want))):
            a = have[k] if k < len(have) else "(missing)"
            b = want[k] if k < len(want) else "(missing)"
            if a == b:
                continue
            na, nb = NUMBER.findall(a), NUMBER.findall(b)
            diff = [(x, y) for x, y in zip(na, nb) if x != y]
            what = (
                f"says {diff[0][0]}, {HEADLINE} gives {diff[0][1]}"
                if diff
                else f"differs from what {HEADLINE} renders: {a!r} vs {b!r}"
            )
            problems.append(
                f"{page}:{start + 2 + k}: headline table {what} (edit the JSON's sources, then "
                f"`python -m tools.check_docs --write-headline`)"
            )
    return problems
