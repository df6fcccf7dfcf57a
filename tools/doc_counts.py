"""Counts the pages state that the repository can compute, checked by ``python -m tools.check_docs``.

A count written by hand goes stale (issue 31: "834 tests" when pytest collected 1,037). So a page either
states a count that is checked here against the files, or does not state it:

1. **config groups**: the group table of ``docs/configuration.md`` (``| group | options |``) lists, for
   every group it names, exactly the files of ``conf/<group>/``;
2. **tutorials**: "six parts", "the six tutorials", "all six scripts" ... in README.md,
   ``tutorials/README.md`` and ``docs/testing.md`` equal the number of ``tutorials/NN_*.py``;
3. **experiments**: "N experiment configs" anywhere in README.md and ``docs/*.md`` equals the number of
   ``conf/experiment/*.yaml``;
4. **tests**: README.md and ``docs/*.md`` state no number of tests. Counting them means collecting the
   suite (slow, and it changes with every test added), so no page says it.
"""

from __future__ import annotations

import re
from pathlib import Path

WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()
NUMBER = r"(\d[\d,]*|" + "|".join(WORDS) + r")"
TUTORIAL_COUNT = re.compile(
    rf"\b{NUMBER}(?: short)? (?:parts|tutorials|notebooks|scripts)\b|\ball {NUMBER} as scripts\b", re.I
)
EXPERIMENT_COUNT = re.compile(rf"\b{NUMBER} experiment configs?\b", re.I)
TEST_COUNT = re.compile(r"\b\d[\d,]* (?:tests|passed|skipped|deselected)\b")
BACKTICKED = re.compile(r"`([a-z0-9_]+)`")


def as_int(word: str) -> int:
    word = word.lower().replace(",", "")
    return int(word) if word.isdigit() else WORDS.index(word)


def lines_of(root: Path, names: list[str]):
    for name in names:
        path = root / name
        if path.is_file():
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                yield name, number, line


def check_group_table(root: Path) -> list[str]:
    """Each row of configuration.md's group table against the files of its conf/ group."""
    page, problems, in_table = "docs/configuration.md", [], False
    for name, number, line in lines_of(root, [page]):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells[:2] == ["group", "options"]:
            in_table = True
            continue
        if not in_table or not cells:
            in_table = in_table and bool(cells)
            continue
        group = cells[0].strip("`")
        folder = root / "conf" / group
        if len(cells) < 2 or not folder.is_dir():
            continue
        listed = set(BACKTICKED.findall(cells[1]))
        files = {p.stem for p in folder.glob("*.yaml")}
        if listed != files:
            missing, extra = sorted(files - listed), sorted(listed - files)
            said = "; ".join(
                s
                for s in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"no such file: {', '.join(extra)}" if extra else "",
                )
                if s
            )
            problems.append(f"{name}:{number}: the `{group}` row does not list conf/{group}/: {said}")
    return problems


def check_counts(root: Path) -> list[str]:
    problems = []
    tutorials = len(list((root / "tutorials").glob("[0-9][0-9]_*.py")))
    for name, number, line in lines_of(root, ["README.md", "tutorials/README.md", "docs/testing.md"]):
        for match in TUTORIAL_COUNT.finditer(line):
            said = as_int(match.group(1) or match.group(2))
            if said != tutorials:
                problems.append(
                    f"{name}:{number}: says {match.group(0)!r}, tutorials/ has {tutorials} parts (tutorials/NN_*.py)"
                )
    pages = ["README.md", *sorted(str(p.relative_to(root)) for p in (root / "docs").glob("*.md"))]
    experiments = len(list((root / "conf" / "experiment").glob("*.yaml")))
    for name, number, line in lines_of(root, pages):
        for match in EXPERIMENT_COUNT.finditer(line):
            if as_int(match.group(1)) != experiments:
                problems.append(f"{name}:{number}: says {match.group(0)!r}, conf/experiment/ has {experiments} configs")
        for match in TEST_COUNT.finditer(line):
            problems.append(
                f"{name}:{number}: states a test count ({match.group(0)!r}) that goes stale with every test: "
                "drop it (`pytest --collect-only -q` counts them)"
            )
    return problems


def check(root: Path) -> list[str]:
    return check_group_table(root) + check_counts(root)
