"""Keep the prose and its evidence together: ``python -m tools.check_docs`` (run by ``make test``).

Exits non-zero, naming the file, the line and both values, when

1. **a README headline number** differs from the results file its row links. The headline table is
   generated: ``docs/results/headline.json`` names, for every number, the results file, table, row and
   column it is read from; ``--write-headline`` reads those numbers into the JSON and rewrites README's
   table between the ``<!-- headline:start -->`` and ``<!-- headline:end -->`` markers. The check reads
   every number again from its results file and compares it with the JSON, and the README table with
   what the JSON renders, so a number changed by hand in either place fails;
2. **a generated table** under ``docs/results`` differs from what its writer makes of the committed
   per-run data: every ``X.json`` with an ``X.md`` beside it whose writer, ``tools.<X>``, has a
   ``table_from_json(data)`` (``essay.md`` from ``essay.json``, ``listops_best.md`` from
   ``listops_best.json``);
3. **a relative link or a cited results file is missing**: markdown links in README.md and docs/**.md,
   and every ``docs/results/...``, ``results/...`` or ``bench/results/...`` path cited in them, in
   ``conf/**/*.yaml`` and in ``tutorials/*.py``.

    python -m tools.check_docs                   # check; exit 1 with one line per problem
    python -m tools.check_docs --write-headline  # read the headline numbers again, rewrite README's table
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from pathlib import Path

from tools import doc_counts  # 4. counts the pages state (configs per group, tutorials, experiments, no test counts)

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = Path("docs/results/headline.json")
START, END = "<!-- headline:start -->", "<!-- headline:end -->"
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED = re.compile(r"(?<![\w/.-])((?:docs/|bench/)?results/[\w./-]*\w)")


class Problem(Exception):
    pass


# ---------------------------------------------------------------- markdown tables


def tables(path: Path) -> list[tuple[str, list[tuple[int, list[str]]]]]:
    """Every markdown table of a file: (the bold title or text line above it, [(line number, cells)])."""
    out, title, rows = [], "", []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append((number, cells))
            continue
        if rows:
            out.append((title, rows))
            rows = []
        if line.strip():
            title = line.strip()
    if rows:
        out.append((title, rows))
    return out


def locate(spec: dict) -> tuple[float, int]:
    """The number ``spec`` names (file, optional table title, row, column, index) and its line."""
    path = ROOT / spec["file"]
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


def formatted(spec: dict, value: float) -> str:
    return f"{value * spec.get('scale', 1):.{spec.get('digits', 1)}f}"


# ---------------------------------------------------------------- the headline table


def render_headline(data: dict) -> list[str]:
    lines = ["| " + " | ".join(data["columns"]) + " |", "|" + "---|" * len(data["columns"])]
    for row in data["rows"]:
        values = [v["value"] for v in row["values"]]
        links = ", ".join(f"[{Path(t['file']).stem}]({t['file']}) (`{t['command']}`)" for t in row["tables"])
        pretrained = row.get("pretrained", "—").format(*values)  # GloVe inputs, the pretrained MiniLM
        cells = [
            row["task"],
            row["best"].format(*values),
            row["transformer"].format(*values),
            pretrained,
            row["anchor"],
            links,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def read_headline() -> dict:
    return json.loads((ROOT / HEADLINE).read_text())


def write_headline() -> list[str]:
    """Read every headline number from its results file into headline.json, then rewrite README's table."""
    data = read_headline()
    for row in data["rows"]:
        for spec in row["values"]:
            value, _ = locate(spec)
            spec["value"] = formatted(spec, value)
    (ROOT / HEADLINE).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    readme = (ROOT / "README.md").read_text().splitlines()
    start, end = readme.index(START), readme.index(END)
    readme[start + 1 : end] = render_headline(data)
    (ROOT / "README.md").write_text("\n".join(readme) + "\n")
    return render_headline(data)


def check_headline() -> list[str]:
    problems = []
    data = read_headline()
    for row in data["rows"]:
        linked = {t["file"] for t in row["tables"]}
        for k, spec in enumerate(row["values"]):
            if spec["file"] not in linked:
                problems.append(
                    f"{HEADLINE}: row {row['task']!r}, value {k} is read from {spec['file']}, "
                    f"which the row does not link ({', '.join(sorted(linked))})"
                )
            try:
                value, line = locate(spec)
            except Problem as e:
                problems.append(str(e))
                continue
            if formatted(spec, value) != spec["value"]:
                problems.append(
                    f"{HEADLINE}: row {row['task']!r} says {spec['value']}, "
                    f"{spec['file']}:{line} has {formatted(spec, value)}"
                )
    readme = (ROOT / "README.md").read_text().splitlines()
    if START not in readme or END not in readme:
        return problems + [f"README.md: no {START} ... {END} markers around the headline table"]
    start, end = readme.index(START), readme.index(END)
    have, want = readme[start + 1 : end], render_headline(data)
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
            f"README.md:{start + 2 + k}: headline table {what} (edit the JSON's sources, then "
            f"`python -m tools.check_docs --write-headline`)"
        )
    return problems


# ---------------------------------------------------------------- generated tables


def check_generated() -> list[str]:
    problems = []
    for data_file in sorted((ROOT / "docs" / "results").rglob("*.json")):
        table = data_file.with_suffix(".md")
        if not table.is_file():
            continue
        try:
            writer = importlib.import_module(f"tools.{data_file.stem}")
        except ModuleNotFoundError:
            continue
        if not hasattr(writer, "table_from_json"):
            continue
        want = writer.table_from_json(json.loads(data_file.read_text())).splitlines()
        have = table.read_text().splitlines()
        rel = table.relative_to(ROOT)
        for k in range(max(len(have), len(want))):
            a = have[k] if k < len(have) else "(missing)"
            b = want[k] if k < len(want) else "(missing)"
            if a != b:
                problems.append(
                    f"{rel}:{k + 1}: has {a!r}, tools.{data_file.stem}.table_from_json("
                    f"{data_file.relative_to(ROOT)}) writes {b!r}"
                )
                break
    return problems


# ---------------------------------------------------------------- links and cited files


def _exists(target: str, base: Path) -> bool:
    target = target.split("#", 1)[0].rstrip("/.,;:")
    if not target:
        return True
    return (base / target).exists() or (ROOT / target).exists() or (ROOT / "docs" / target).exists()


def check_links() -> list[str]:
    problems = []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    cited_only = [*sorted((ROOT / "conf").rglob("*.yaml")), *sorted((ROOT / "tutorials").glob("*.py"))]
    for path in pages + cited_only:
        rel = path.relative_to(ROOT)
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            targets = [] if path in cited_only else LINK.findall(line)
            for target in targets:
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue  # a web address or an anchor on the same page
                if not _exists(target, path.parent):
                    problems.append(f"{rel}:{number}: link to {target}, which does not exist")
            for target in CITED.findall(line):
                if any(ch in target for ch in "*{<") or target in targets:
                    continue  # a pattern (seed*/...) or a link already checked
                if not _exists(target, path.parent):
                    problems.append(f"{rel}:{number}: cites {target}, which does not exist")
    return problems


def check() -> list[str]:
    return check_links() + check_headline() + check_generated() + doc_counts.check(ROOT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-headline", action="store_true", help="read the numbers again, rewrite README")
    args = parser.parse_args(argv)
    if args.write_headline:
        try:
            print("\n".join(write_headline()))
        except Problem as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    problems = check()
    for p in problems:
        print(p)
    print(f"check_docs: {len(problems)} problem(s)" if problems else "check_docs: the docs agree with their evidence")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
