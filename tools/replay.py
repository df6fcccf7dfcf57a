"""Every table under ``docs/results/`` is either replayed from committed per-run data or sealed.

**Replayed**: ``python -m tools.check_docs`` renders the table again from the committed file it was made
from and compares it with the committed table byte for byte, naming the file, the line and both values
on a mismatch. A replayed table is a ``Table``: the table, the committed files it is drawn from and the
function that renders it. They come from three places:

1. ``docs/results/runs/<name>.jsonl`` (per-run records written by ``make experiment``, ``tools.records``)
   -> ``docs/results/<name>.md``, rendered by ``tools.results_table``; only the generated part is
   compared (everything above the first ``## `` heading: the written analysis below it is prose);
2. ``TABLES`` below: the tables a tool draws (``verdicts``, ``calibration``);
3. the tables the analyses outside ``tools/`` declare (``declared``): each provider that
   ``pyproject.toml``'s ``[tool.tagnn] replays`` names (``"studies:replays"``) returns its ``Table`` list; for
   the studies that is every ``studies/<X>/__init__.py``'s ``REPLAYS``. ``tools/`` names no study: a study
   imports ``Table`` from here and lists its own tables, and ``tests/tools/test_import_structure.py`` fails when a
   module under ``tools/`` imports one.

A new experiment plugs in with no code when ``make experiment`` writes its table (1), or with one ``Table``
in its study's ``REPLAYS`` (3).

**Sealed**: a table whose per-run data is lost is held to a copy of its rows (``tools.seals``).
"""

from __future__ import annotations

import functools
import importlib
import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tools.markdown import generated_part
from tools.seals import RESULTS, read_sealed

RUNS = RESULTS / "runs"
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"  # names the providers of ``declared``


@dataclass
class Table:
    """A committed table, the committed files it is drawn from, and how (``render(*sources) -> text``)."""

    table: str
    sources: tuple[str, ...]
    render: Callable[..., str]
    writer: str  # how the message names the renderer
    generated_only: bool = False  # compare only the part above the first '## ' heading

    def want(self, root: Path) -> list[str]:
        data = []
        for source in self.sources:
            path = root / source
            if not path.is_file():
                raise FileNotFoundError(
                    f"{self.table}: its source {source} is missing; {self.writer} draws it from that"
                )
            text = path.read_text()
            data.append(
                [json.loads(line) for line in text.splitlines() if line.strip()]
                if path.suffix == ".jsonl"
                else json.loads(text)
            )
        return self.render(*data).splitlines()


def _calibration(data: dict) -> str:
    from tools import stats

    return stats.markdown(data)


def _verdicts(committed: dict, *records) -> str:
    from tools import verdicts

    return verdicts.replay(committed, *records)


def _verdict_sources() -> tuple[str, ...]:
    from tools import verdicts

    return ("docs/results/verdicts.json", *verdicts.sources())


# (2): tables drawn by a tool of its own from committed JSON; a new one is one line here
TABLES = [
    # the verdicts the prose pages state, drawn again from the records (and the JSON they read checked against them)
    Table("docs/results/verdicts.md", _verdict_sources(), _verdicts, "tools.verdicts.replay"),
    Table("docs/results/calibration.md", ("docs/results/calibration.json",), _calibration, "tools.stats.markdown"),
]


def providers(pyproject: Path = PYPROJECT, key: str = "replays") -> list[str]:
    """The providers of replayed tables (``key="replays"``) or of checks (``"checks"``) outside ``tools/``:
    ``module:function`` each, as ``pyproject.toml``'s ``[tool.tagnn]`` lists them (``["studies:replays"]``)."""
    return tomllib.loads(pyproject.read_text()).get("tool", {}).get("tagnn", {}).get(key, [])


def _provided(key: str) -> list:
    out: list = []
    for spec in providers(key=key):
        module, _, function = spec.partition(":")
        out += [(spec, item) for item in getattr(importlib.import_module(module), function)()]
    return out


def declared_checks() -> list[Callable[[Path], list[str]]]:
    """The checks the analyses outside ``tools/`` declare beside their tables (``[tool.tagnn] checks``; for the
    studies, every ``studies/<X>/__init__.py``'s ``CHECKS``): each takes the repository root and returns one line
    per problem, such as a study's reading of the records that is older than the records."""
    found = _provided("checks")
    for spec, check in found:
        if not callable(check):
            raise TypeError(f"{spec} gave {check!r}, not a callable")
    return [check for _, check in found]


@functools.cache
def declared() -> tuple[Table, ...]:
    """(3): the tables the analyses outside ``tools/`` replay, each provider's list in the order it gives
    them. The providers are configuration, not code of ``tools/``: this module imports them by the names
    ``pyproject.toml`` gives, as an entry point is loaded, and names none itself."""
    found = _provided("replays")
    for spec, t in found:
        if not isinstance(t, Table):
            raise TypeError(f"{spec} gave {t!r}, not a tools.replay.Table")
    return tuple(t for _, t in found)


def _from_records(records: list[dict], root_name: str, command: str | None) -> str:
    from tools import results_table

    runs = results_table.from_records(records, results_table.grid_keys(Path(root_name).stem))
    return results_table.render(runs, root_name, command)


def command_of(path: Path) -> str | None:
    """The command a results_table file names in its first line (``Produced by `CMD` from ...``)."""
    first = path.read_text().split("\n", 1)[0] if path.is_file() else ""
    if first.startswith("Produced by `") and "` from `" in first:
        return first[len("Produced by `") : first.index("` from `")]
    return None


def tables(root: Path, extra: tuple[Table, ...] | None = None) -> list[Table]:
    """Every replayed table of the repository at ``root``: (1) its records' tables, (2) ``TABLES`` and (3) the
    tables ``extra`` lists (``declared()`` when not given), a sealed one of (2) or (3) left out."""
    out, sealed = [], read_sealed(root)
    for records in sorted((root / RUNS).rglob("*.jsonl")):  # (1) make experiment's records
        name = records.relative_to(root / RUNS).with_suffix("")
        table = RESULTS / f"{name}.md"
        if str(table) in sealed:  # records of a part of its runs (make experiment ARGS=--missing): held to its seal
            continue
        rel = str(records.relative_to(root))
        command = command_of(root / table)
        out.append(
            Table(
                str(table),
                (rel,),
                lambda recs, rel=rel, command=command: _from_records(recs, rel, command),
                "tools.results_table",
                generated_only=True,
            )
        )
    others = [*TABLES, *(declared() if extra is None else extra)]
    return out + [t for t in others if t.table not in sealed]  # a sealed one waits for its source


def judged_as_committed(
    root: Path, rel: str, judge: Callable[[Path, dict], list[dict]], command: str, key: str = "comparisons"
) -> list[str]:
    """One line when the committed JSON ``rel`` holds under ``key`` other verdicts than ``judge(root, data)`` gives
    today from the rest of the same file (the rule of ``tools.stats`` or the cells changed since the JSON was
    written, and only its table was drawn again); none when they agree or the file is absent. A study lists such a
    check in its ``CHECKS``."""
    path = root / rel
    if not path.is_file():
        return []
    data = json.loads(path.read_text())
    committed = data.pop(key, None) or []
    now = judge(root, data)
    if _rounded(committed) == _rounded(now):  # the last bits of a float may move with a library's build
        return []
    pairs = zip(committed, now)
    at = next((i for i, (a, b) in enumerate(pairs) if _rounded(a) != _rounded(b)), min(len(committed), len(now)))
    was = committed[at] if at < len(committed) else "nothing"
    is_now = now[at] if at < len(now) else "nothing"
    return [
        f"{rel}: its {key} are not what the rule gives today from the same cells ({len(committed)} committed, "
        f"{len(now)} now; first at #{at}: {_short(was)} -> {_short(is_now)}): rerun {command}"
    ]


def _rounded(value):
    """``value`` with every float rounded to 10 significant digits, for comparing two judgements of the same cells."""
    if isinstance(value, float):
        return float(f"{value:.10g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _short(row) -> str:
    """A comparison row in one line: its names, its difference and noise, and its verdict."""
    if not isinstance(row, dict):
        return str(row)
    names = {k: v for k, v in row.items() if isinstance(v, (str, dict)) and k != "verdict"}
    sizes = " ".join(f"{k} {row[k]:.4g}" for k in ("diff", "noise") if isinstance(row.get(k), (int, float)))
    return f"{json.dumps(names, sort_keys=True)} {sizes} {row.get('verdict')!r}"


def compare(root: Path, t: Table) -> list[str]:
    """One problem (the first differing line) when the committed table differs from its replay."""
    path = root / t.table
    if not path.is_file():
        return [f"{t.table}: missing; {t.writer}({', '.join(t.sources)}) writes it"]
    try:
        want = t.want(root)
    except FileNotFoundError as e:
        return [str(e)]
    have = path.read_text().splitlines()
    if t.generated_only:
        have, want = generated_part(have), generated_part(want)
    for k in range(max(len(have), len(want))):
        a = have[k] if k < len(have) else "(missing)"
        b = want[k] if k < len(want) else "(missing)"
        if a != b:
            return [f"{t.table}:{k + 1}: has {a!r}, {t.writer}({', '.join(t.sources)}) writes {b!r}"]
    return []


def render(root: Path, rel: str) -> Path:
    """Write the replayed table ``rel`` again from its committed sources: what ``check_docs`` compares it
    with. For a table drawn from ``make experiment``'s records only the generated part (above the first
    ``## `` heading) is rewritten; the written analysis below it is kept. For when the sources changed
    and the runs behind the table are gone (``--table-only`` needs ``multirun/``, a study its run
    directories): ``python -m tools.check_docs --render docs/results/soft_syntax.md``."""
    found = {t.table: t for t in tables(root)}
    sealed = read_sealed(root)
    if rel in sealed:
        raise ValueError(f"{rel}: sealed, no committed records to render it from; {sealed[rel]['note']}")
    if rel not in found:
        raise ValueError(f"{rel}: no committed source draws it; replayed tables: {', '.join(sorted(found))}")
    t, path = found[rel], root / rel
    want = t.want(root)
    if t.generated_only and path.is_file():
        have = path.read_text().splitlines()
        start = next((k for k, line in enumerate(have) if line.startswith("## ")), len(have))
        prose = have[start:]
        want = generated_part(want) + ([""] + prose if prose else [])
    from engine.io import write_text

    return write_text(path, "\n".join(want) + "\n")
