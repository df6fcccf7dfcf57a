"""Every table under ``docs/results/`` is either replayed from committed per-run data or sealed.

**Replayed**: ``python -m tools.check_docs`` renders the table again from the committed file it was made
from and compares it with the committed table byte for byte, naming the file, the line and both values
on a mismatch. Three ways a table is replayed, in this order:

1. ``docs/results/runs/<name>.jsonl`` (per-run records written by ``make experiment``, ``tools.records``)
   -> ``docs/results/<name>.md``, rendered by ``tools.results_table``; only the generated part is
   compared (everything above the first ``## `` heading: the written analysis below it is prose);
2. ``docs/results/X.json`` with ``X.md`` beside it and a writer ``studies.X.table_from_json(data)``
   (the study of that name: ``essay``, ``listops_best``);
3. an entry of ``TABLES`` below: a table, the JSON files it is drawn from and the function that renders
   it (``pretrained_graphs``, ``pretrained_graphs_frozen``, ``pretrained_syntax``, ``sst_syntax``, ``verdicts``).

A new experiment plugs in with no code when ``make experiment`` writes its table (1), or with one
``table_from_json`` in its study (2), or one line in ``TABLES`` (3).

**Sealed**: a table whose per-run data is lost (its ``multirun/`` directories were never committed)
says so in its header, above its first table (``per-run records not committed; rerun: `...` ``), and ``check_docs`` holds
every table row of it (every line starting with ``|``) to the copy taken when the records were found
missing, ``docs/results/runs/unrecorded.json``. A hand edit fails; only rerunning it (which writes its
records and drops its seal) changes it. ``check_docs`` prints how many tables are still sealed.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path("docs/results")
RUNS = RESULTS / "runs"
SEALED = RUNS / "unrecorded.json"
NOTE = "per-run records not committed; rerun: "


def _pretrained_graphs(pg: dict) -> str:
    from studies import pretrained_graphs

    figure = f"\n![test accuracy by graph](../figures/{pretrained_graphs.EXPERIMENT}.png)\n"
    return pretrained_graphs.markdown(pg, f"make experiment E={pretrained_graphs.EXPERIMENT}") + figure


def _pretrained_graphs_frozen(frozen: dict) -> str:
    import tempfile

    from studies import graph_probe

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "table.md"
        graph_probe.write_markdown(frozen["results"], path)
        return path.read_text()


def _pretrained_syntax(*results: dict) -> str:
    from studies import pretrained_syntax

    return pretrained_syntax.markdown(list(results))


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


def _sst_syntax(*results: dict) -> str:
    from studies import attention_syntax

    return attention_syntax.sst_seeds_table(*results)


def _long_range_lengths(data: dict) -> str:
    from studies import long_range

    return long_range.markdown(data)


def _soft_syntax(data: dict, pretrained: dict, timing: dict, phrases: list[dict]) -> str:
    from studies import soft_syntax

    return soft_syntax.replay_table(data, pretrained, timing, phrases)


def _calibration(data: dict) -> str:
    from tools import stats

    return stats.markdown(data)


def _verdicts(committed: dict, *records) -> str:
    from tools import verdicts

    return verdicts.replay(committed, *records)


def _verdict_sources() -> tuple[str, ...]:
    from tools import verdicts

    return ("docs/results/verdicts.json", *verdicts.sources())


# (3): tables drawn by a tool of their own from committed JSON; a new one is one line here
TABLES = [
    # the verdicts the prose pages state, drawn again from the records (and the JSON they read checked against them)
    Table("docs/results/verdicts.md", _verdict_sources(), _verdicts, "tools.verdicts.replay"),
    Table("docs/results/calibration.md", ("docs/results/calibration.json",), _calibration, "tools.stats.markdown"),
    Table(
        "docs/results/soft_syntax.md",
        (
            *(f"docs/results/{n}.json" for n in ("soft_syntax", "pretrained_graphs", "soft_syntax_time")),
            "docs/results/runs/sst_phrases.jsonl",  # its targets section chooses among phrase-level training too
        ),
        _soft_syntax,
        "studies.soft_syntax.replay_table",
    ),
    Table(
        "docs/results/pretrained_graphs.md",
        ("docs/results/pretrained_graphs.json",),
        _pretrained_graphs,
        "studies.pretrained_graphs.markdown",
    ),
    Table(
        "docs/results/pretrained_graphs_frozen.md",
        ("docs/results/pretrained_graphs_frozen.json",),
        _pretrained_graphs_frozen,
        "studies.graph_probe.write_markdown",
    ),
    Table(
        "docs/results/sst_syntax.md",
        # the seeds of make sst_syntax's loop: the three complete-graph Transformers of make experiment E=sst
        tuple(f"docs/results/sst_syntax/seed{s}_{t}/syntax.json" for s in (0, 1, 2) for t in ("gold", "dep")),
        _sst_syntax,
        "studies.attention_syntax.sst_seeds_table",
        generated_only=True,  # the answer below its '## ' heading is prose
    ),
    Table(
        "docs/results/long_range_lengths.md",
        ("docs/results/long_range_lengths.json",),  # studies.long_range --out writes both
        _long_range_lengths,
        "studies.long_range.markdown",
    ),
    Table(
        "docs/results/pretrained_syntax.md",
        tuple(f"docs/results/pretrained_syntax{s}.json" for s in ("", "_scratch", "_finetuned")),
        _pretrained_syntax,
        "studies.pretrained_syntax.markdown",
    ),
]


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


def tables(root: Path) -> list[Table]:
    """Every replayed table of the repository at ``root``."""
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
    for data_file in sorted((root / RESULTS).rglob("*.json")):  # (2) X.json + studies.X.table_from_json
        if not data_file.with_suffix(".md").is_file() or data_file.is_relative_to(root / RUNS):
            continue
        try:
            writer = importlib.import_module(f"studies.{data_file.stem}")
        except ModuleNotFoundError:
            continue
        if hasattr(writer, "table_from_json"):
            rel = str(data_file.relative_to(root))
            out.append(
                Table(
                    rel[: -len(".json")] + ".md",
                    (rel,),
                    writer.table_from_json,
                    f"studies.{data_file.stem}.table_from_json",
                )
            )
    return out + [t for t in TABLES if t.table not in sealed]  # a sealed one waits for its source


def generated_part(lines: list[str]) -> list[str]:
    """The lines above the first ``## `` heading, trailing blank lines dropped."""
    end = next((k for k, line in enumerate(lines) if line.startswith("## ")), len(lines))
    part = lines[:end]
    while part and not part[-1].strip():
        part.pop()
    return part


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


# ---------------------------------------------------------------- sealed tables


def table_rows(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of every table row of a markdown file."""
    return [(k, line) for k, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("|")]


def read_sealed(root: Path) -> dict:
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
