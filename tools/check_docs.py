"""Keep the prose and its evidence together: ``python -m tools.check_docs`` (run by ``make test``).

Exits non-zero, naming the file, the line and both values, when

1. **a headline number** differs from the results file its row links (``tools.headline``). The headline
   tables are generated: ``docs/results/headline.json`` names, for every number, the results file, table, row and
   column it is read from; ``--write-headline`` reads those numbers into the JSON and rewrites README's
   short table (each row's ``short`` cells, one number per cell) and ``docs/headline.md``'s full one
   (every number, with its tables and commands) between their ``<!-- headline:start -->`` and
   ``<!-- headline:end -->`` markers. The check reads every number again from its results file and
   compares it with the JSON, and both tables with what the JSON renders, so a number changed by hand in
   any of them fails;
2. **a table under ``docs/results``** differs from what its writer makes of the committed per-run data
   (``docs/results/runs/<E>.jsonl`` records that ``make experiment`` writes, or a committed JSON:
   ``tools.replay``, which also finds the tables the studies declare), or, for a table whose runs were never
   committed, from its sealed rows (``tools.seals``: ``docs/results/runs/unrecorded.json``; the table's header
   says "per-run records not committed");
   every table is one or the other, and the count of sealed tables is printed;
3. **a relative link or a cited results file is missing**: markdown links in README.md and docs/**.md,
   and every ``docs/results/...``, ``results/...`` or ``bench/results/...`` path cited in them, in
   ``conf/**/*.yaml`` and in ``tutorials/*.py``;
4. **a number in prose differs from the record it restates**: ``<!-- ref: FILE > ROW > COLUMN -->`` after a
   number in README, docs/**.md or a tutorial (``# ref: ...`` at the end of a Python line; ``<!-- ref:
   noise n=N p=P [difference] [x2] -->`` after a binomial standard error, worked out again; ``<!-- ref: count
   FILE > TABLE > @k >= X -->`` after a count of a table's cells, counted again; after "N of M", a first
   reference ties N, a second M), and every cell of a table under ``<!-- restates: FILE -->``
   (docs/configuration.md, "Numbers in prose"). The decimals, and the integers of an "N of M" or a
   percentage, that no reference ties are listed in ``docs/results/unchecked_numbers.json`` (``--write-untied``).
   One run's number (a seed of a mean) is tied to its record: ``<!-- ref: docs/results/runs/E.jsonl >
   dataset=sst; seed=0 > test_acc -->`` (the run's overrides but ``experiment=``, ``;`` between them);
5. **a check a study declares fails** (``CHECKS`` beside its ``REPLAYS``, ``tools.replay.declared_checks``): for
   ``studies.long_range``, ``long_range_chance.json``'s one-label runs were read from other records than
   ``docs/results/runs/`` now holds on that split (gathered, replaced or removed since): rerun
   ``python -m studies.long_range.chance``; for ``studies.pretrained_graphs`` and ``studies.soft_syntax``, their JSON's
   ``comparisons`` are not what the rule gives today from the same cells (``tools.replay.judged_as_committed``).

    python -m tools.check_docs                   # check; exit 1 with one line per problem
    python -m tools.check_docs --write-headline  # read the headline numbers again, rewrite both tables
    python -m tools.check_docs --write-untied    # list again the numbers no reference ties
    python -m tools.check_docs --seal docs/results/T.md 'make experiment E=T'   # runs lost: hold T's rows
    python -m tools.check_docs --render docs/results/T.md   # sources changed, runs gone: write T from its sources
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

from tools import (  # doc_counts: the counts the pages state (configs per group, tutorials, experiments)
    doc_counts,
    experiment,
    headline,
    markdown,
    replay,
    seals,
)
from tools.headline import END, START
from tools.markdown import NUMBER

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED = re.compile(r"(?<![\w/.-])((?:docs/|bench/)?results/[\w./-]*\w)")


class Problem(Exception):
    pass


# ---------------------------------------------------------------- generated tables


def check_generated() -> list[str]:
    """Every table under docs/results replayed from its committed records, or held to its seal (tools.replay)."""
    problems, replayed = [], set()
    for table in replay.tables(ROOT):
        replayed.add(table.table)
        problems += replay.compare(ROOT, table)
    return problems + seals.check_sealed(ROOT, replayed)


def table_counts() -> tuple[int, list[str]]:
    """(tables replayed from records, tables sealed because their per-run records are not committed)."""
    return len(replay.tables(ROOT)), sorted(seals.read_sealed(ROOT))


# ---------------------------------------------------------------- numbers restated in prose

REF = re.compile(r"<!--\s*ref:\s*(.*?)\s*-->|#\s*ref:\s*(.*?)\s*$")  # markdown, or a Python line's comment
PAIR = re.compile(r"(−?\d+(?:\.\d+)?)\s*%?\s*±\s*(\d+(?:\.\d+)?)\s*%?[*\s]*$")  # "0.577 ± 0.007" just before a ref
COMBINED = re.compile(r" (minus|over) (?=[\w./-]+\.(?:md|jsonl?|yaml) >)")  # the operator, then B's file
RESTATES = re.compile(r"<!--\s*restates:\s*(.*?)\s*-->")


def prose_pages() -> list[Path]:
    """The pages whose prose may restate a result: README, docs/**.md, the tutorials."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "tutorials").glob("*.py"))]


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of a page's prose: fenced code blocks left out, inline code spans blanked
    (a reference shown as an example is not one)."""
    out, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.lstrip("# ").startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, re.sub(r"`[^`]*`", "``", line)))
    return out


def _label(text: str) -> str:
    """A row or column name as written, for comparing: no markup, no trailing parenthesis, lower case."""
    text = re.sub(r"[*`]", "", text).strip()
    return re.sub(r"\s*\(.*\)$", "", text).strip().lower()


def numbers(text: str) -> list[str]:
    """The numbers of a cell or a sentence as written: ``−`` a minus, ``8,164`` one number."""
    return NUMBER.findall(re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text.replace("−", "-")))


def _raw(text: str) -> str:
    """A row name as written, parenthesis kept: no markup, lower case."""
    return re.sub(r"[*`]", "", text).strip().lower()


INTEGER = re.compile(r"[-−+]?\d+")


def same(written: str, value: str | int | float, scaled: bool = True) -> bool:
    """Does ``written`` (a number as the prose gives it) state ``value`` (a number of the evidence), rounded
    to the digits written, as is, in percent or as a fraction of one, sign aside (``loses 3.7`` restates ``-3.70``)?
    An integer of the evidence (a count: heads kept, runs, cells) is stated only by that integer, exactly; a
    quantity with a unit (hours: ``scaled=False``) only as is."""
    from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal

    w = Decimal(written.replace("−", "-").lstrip("+-"))
    v = abs(Decimal(str(value).replace("−", "-")))
    if isinstance(value, int) or INTEGER.fullmatch(str(value)):
        return bool(INTEGER.fullmatch(written)) and w == v
    step = Decimal(1).scaleb(w.as_tuple().exponent)
    return any(
        (v * scale).quantize(step, rounding=mode) == w
        for scale in ((1, 100, Decimal("0.01")) if scaled else (1,))
        for mode in (ROUND_HALF_UP, ROUND_HALF_EVEN)
    )


PRODUCED = re.compile(r"\(([\d,]+) runs, (\d+(?:\.\d+)?) h of training\)")  # tools.results_table's first line
PRODUCED_KEYS = ("runs", "training hours")
PRODUCED_WHERE = " ('Produced by' line)"


def resolve(spec: str, page: str, pair: bool = False) -> tuple[list[str], str]:
    """The numbers a reference names, and where: ``FILE > [TABLE TITLE >] ROW > COLUMN[@k]`` for a cell of
    a markdown table (``@k``: its k-th number, from 0, else its first; ``ROW`` may name the leading cells of
    a row, ``;`` between them; ``pair``: a "mean ± std" is written before the reference, so from ``@k`` on
    two numbers), or
    ``FILE > KEY > KEY ...`` for a value of a JSON file or of a config (``conf/**/*.yaml``), or
    ``FILE.md > runs`` / ``FILE.md > training hours`` for the counts of a results table's "Produced by" line
    (``(39 runs, 0.5 h of training)``, which ``tools.results_table`` writes and ``tools.replay`` checks)."""
    parts = [p.strip() for p in spec.split(">")]
    path = ROOT / parts[0]
    if not path.is_file():
        raise Problem(f"{page}: a reference names {parts[0]}, which does not exist")
    if path.suffix in (".json", ".yaml"):  # a result, or a config value (conf/**/*.yaml) the prose states
        value = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
        return [_number_at(value, parts[1:], parts[0], page)], parts[0]
    if path.suffix == ".jsonl":  # one run's record: its overrides (experiment= left out, ';' between), a key
        return _from_record(path, parts, page), parts[0]
    if len(parts) == 2 and parts[1] in PRODUCED_KEYS:  # "(39 runs, 0.5 h of training)": a results page's first line
        m = PRODUCED.search(path.read_text().split("\n", 1)[0])  # the first line only: prose below may quote others
        if not m:
            raise Problem(
                f"{page}: {parts[0]}'s first line says no '(N runs, X h of training)': write the table again "
                "(python -m tools.experiment E --table-only)"
            )
        return [m[PRODUCED_KEYS.index(parts[1]) + 1].replace(",", "")], f"{parts[0]}{PRODUCED_WHERE}"
    if len(parts) not in (3, 4):
        raise Problem(f"{page}: reference {spec!r}: write FILE > [TABLE TITLE >] ROW > COLUMN")
    title, row, col = (parts[1] if len(parts) == 4 else ""), parts[-2], parts[-1]
    col, _, index = col.partition("@")
    for table_title, rows in markdown.tables(path):
        if title and title.lower() not in table_title.lower():
            continue
        header = [_label(c) for c in rows[0][1]]
        if _label(col) not in header:
            continue
        k = header.index(_label(col))
        keys = [_label(key) for key in row.split(";")]  # "graph_choice; transformer: tree - complete"
        written = [_raw(key) for key in row.split(";")]  # "complete (dense)": a row named in full comes first
        exact = [r for r in rows[1:] if [_raw(c) for c in r[1][: len(keys)]] == written]
        for number, cells in exact + rows[1:]:
            if [_label(c) for c in cells[: len(keys)]] == keys and k < len(cells):
                found = numbers(cells[k])
                if index:
                    found = found[int(index) : int(index) + 1 + pair]
                return found, f"{parts[0]}:{number}"
    raise Problem(f"{page}: {parts[0]} has no cell {row!r} / {col!r}" + (f" in table {title!r}" if title else ""))


def _from_record(path: Path, parts: list[str], page: str) -> list[str]:
    """``runs/E.jsonl > dataset=sst; seed=0 > test_acc``: a value of the one record whose overrides, but for
    ``experiment=``, are exactly those named (``test_by_depth > 2 > acc``: a key below it)."""
    if len(parts) < 3:
        raise Problem(f"{page}: reference {' > '.join(parts)!r}: write FILE.jsonl > OVERRIDE; OVERRIDE > KEY")
    want = sorted(o.strip() for o in parts[1].split(";") if o.strip())
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    found = [r for r in runs if sorted(o for o in r["overrides"] if not o.startswith("experiment=")) == want]
    if len(found) != 1:
        raise Problem(f"{page}: {parts[0]} has {len(found)} runs with the overrides {'; '.join(want)}, not one")
    return [_number_at(found[0], parts[2:], f"{parts[0]} > {parts[1]}", page)]


def _number_at(value, keys: list[str], where: str, page: str) -> str:
    """The number below ``keys`` (a list index or a mapping key each) of ``value``, as ``repr`` writes it."""
    for key in keys:
        try:
            value = value[int(key)] if isinstance(value, list) else value[key]
        except (KeyError, IndexError, ValueError, TypeError):
            raise Problem(f"{page}: {where} has no {' > '.join(keys)}") from None
    if not isinstance(value, (int, float)):
        raise Problem(f"{page}: {where} > {' > '.join(keys)} is not a number ({value!r})")
    return repr(value)


NOISE = re.compile(r"noise\s+n=([\d,]+)\s+p=(0?\.\d+)((?:\s+(?:difference|x\d+))*)\s*$")


def noise(spec: str, page: str) -> tuple[list[str], str]:
    """``noise n=N p=P [difference] [xK]``: the binomial standard error of an accuracy P on N examples,
    sqrt(P(1-P)/N), times sqrt(2) for a difference of two such accuracies, times K (``x2``: two standard
    errors), as a fraction of one (the prose may write it in points)."""
    from decimal import Decimal

    m = NOISE.match(spec)
    if not m:
        raise Problem(f"{page}: reference {spec!r}: write noise n=N p=P [difference] [xK]")
    n, p = int(m[1].replace(",", "")), Decimal(m[2])
    value = (p * (1 - p) / n).sqrt()
    if "difference" in m[3].split():
        value *= Decimal(2).sqrt()
    for k in re.findall(r"x(\d+)", m[3]):
        value *= int(k)
    return [str(value)], f"the binomial standard error ({spec})"


def combined(spec: str, page: str) -> tuple[list[str], str]:
    """``A minus B`` or ``A over B``, two references of ``resolve``'s kind: the difference or the ratio of
    their (first) numbers."""
    from decimal import Decimal

    m = COMBINED.search(spec)
    op = f" {m[1]} "
    (a, where_a), (b, where_b) = (resolve(part.strip(), page) for part in (spec[: m.start()], spec[m.end() :]))
    if not a or not b or (op == " over " and Decimal(b[0]) == 0):
        raise Problem(f"{page}: {spec}: a side names no number ({where_a}: {a}, {where_b}: {b})")
    value = Decimal(a[0]) - Decimal(b[0]) if op == " minus " else Decimal(a[0]) / Decimal(b[0])
    return [str(value)], f"{where_a}{op}{where_b}"


COUNT = re.compile(r"count\s+(.+?)\s*>\s*([^>@]*?)\s*@(\d+)(?:\s*(>=|<=|>|<|==)\s*(−?\d+(?:\.\d+)?))?\s*$")


def count(spec: str, page: str) -> tuple[list[str], str]:
    """``count FILE > TABLE TITLE > [COLUMN]@k [OP X]``: how many cells of a markdown table (the first whose
    title holds TABLE TITLE; the cells of COLUMN, else of every column but the row label) have a k-th number
    (from 0), and, with ``OP X`` (``>=``, ``>``, ``<=``, ``<``, ``==``), how many of those k-th numbers pass
    it: "in 12 of the 13 cells" is ``count FILE > Test accuracy > @1 >= 0.015`` and ``... > @1``."""
    import operator
    from decimal import Decimal

    m = COUNT.match(spec)
    if not m:
        raise Problem(f"{page}: reference {spec!r}: write count FILE > TABLE TITLE > [COLUMN]@k [OP X]")
    file, _, title = (p.strip() for p in m[1].rpartition(">"))
    if not file:
        raise Problem(f"{page}: reference {spec!r}: write count FILE > TABLE TITLE > [COLUMN]@k [OP X]")
    if not (ROOT / file).is_file():
        raise Problem(f"{page}: a reference names {file}, which does not exist")
    found = [(t, rows) for t, rows in markdown.tables(ROOT / file) if title.lower() in t.lower()]
    if not found:
        raise Problem(f"{page}: {file} has no table {title!r}")
    header = [_label(c) for c in found[0][1][0][1]]
    if m[2] and _label(m[2]) not in header:
        raise Problem(f"{page}: {file}'s table {title!r} has no column {m[2]!r}")
    columns = [header.index(_label(m[2]))] if m[2] else range(1, len(header))
    ops = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq}
    k, n = int(m[3]), 0
    for _, cells in found[0][1][1:]:
        for c in columns:
            values = numbers(cells[c]) if c < len(cells) else []
            if len(values) > k and (not m[4] or ops[m[4]](Decimal(values[k]), Decimal(m[5].replace("−", "-")))):
                n += 1
    return [str(n)], f"{file} (table {found[0][0]!r}: cells with a number @{k}{f' {m[4]} {m[5]}' if m[4] else ''})"


OF = re.compile(
    r"(?<![\w.,−-])(\d{1,3}(?:,\d{3})+|\d+) (?:out )?of (?:the |its |their |all )?(\d{1,3}(?:,\d{3})+|\d+)(?![\w.%])"
)
OF_END = re.compile(OF.pattern + r"\s*$")
COMMENT = re.compile(r"<!--.*?-->|#\s*ref:.*$")
CONFIG = re.compile(r"<!--\s*config:\s*(\S.*?)\s*-->")  # "8 of 160 <!-- config: ... --> steps": a setting's, no result


def _blank(line: str) -> str:
    """A line with its comments (references, markers) and link targets turned into spaces: the same length, so
    a position in it is one in the line."""
    line = COMMENT.sub(lambda m: " " * len(m[0]), line)
    return re.sub(r"(?<=\])\([^)]*\)", lambda m: " " * len(m[0]), line)


def of_before(line: str, start: int) -> tuple[re.Match, int] | None:
    """The "N of M" (``29 of 32``, ``12 of the 13``) right before the comment at ``start``, and which of its
    numbers that comment ties: the first reference after it N (0), the second M (1)."""
    m = OF_END.search(_blank(line[:start]))
    return (m, len(REF.findall(line[m.end(2) : start]))) if m else None


# a reference to a time (a column "training hours", "wall (s)", a key "train_seconds"): hours are hours, not a
# fraction or a percentage, so its number is compared as is
UNIT = re.compile(r"hour|second|minute|\bwall\b|\((?:s|ms|min|h)\)", re.IGNORECASE)


def check_refs() -> list[str]:
    """Every ``<!-- ref: ... -->``: the number just before it is the cell or JSON value it names; after a
    "mean ± std" (``0.577 ± 0.007 <!-- ref: ... -->``), both are the cell's first two numbers; for
    ``<!-- ref: A minus B -->``, the difference of A's and B's (``+14.7`` states 0.625 minus 0.478), and for
    ``A over B`` their ratio (``1.75×`` states 398.25 over 228.15)."""
    problems = []
    for path in prose_pages():
        rel = path.relative_to(ROOT)
        for number, line in prose_lines(path):
            for m in REF.finditer(line):
                spec = m.group(1) or m.group(2)
                before = REF.sub("", line[: m.start()])
                written = numbers(before)
                try:
                    if spec.startswith("count "):  # a count of a table's cells, worked out again
                        found, where = count(spec, f"{rel}:{number}")
                    elif spec.startswith("noise "):  # a standard error worked out from n and p, not read
                        found, where = noise(spec, f"{rel}:{number}")
                    elif COMBINED.search(spec):  # "A minus B", "A over B": two values combined
                        found, where = combined(spec, f"{rel}:{number}")
                    else:
                        found, where = resolve(spec, f"{rel}:{number}", pair=bool(PAIR.search(before)))
                except Problem as e:
                    problems.append(str(e))
                    continue
                if not written:
                    problems.append(f"{rel}:{number}: no number before the reference to {spec}")
                    continue
                pair = PAIR.search(before)  # "mean ± std": the cell's first two numbers, both
                written = list(pair.groups()) if pair else written[-1:]
                of = of_before(line, m.start())  # "N of M <!-- ref: N's --> <!-- ref: M's -->"
                if of and of[1] > 1:
                    problems.append(f"{rel}:{number}: a third reference after {of[0][1]} of {of[0][2]}")
                    continue
                if of:
                    written = [of[0][1 + of[1]].replace(",", "")]
                as_is = where.endswith(PRODUCED_WHERE) or bool(UNIT.search(spec.rsplit(">", 1)[-1]))
                for k, w in enumerate(written):
                    if len(found) <= k or not same(w, found[k], scaled=not as_is):
                        problems.append(
                            f"{rel}:{number}: says {w}, {where} has {found[k] if len(found) > k else 'none'}"
                        )
                        break
    return problems


def _restated_tables(path: Path) -> list[tuple[list[str], list[tuple[int, list[str]]]]]:
    """The tables of a page that follow a ``<!-- restates: FILE[, FILE] [> TABLE TITLE] -->`` line."""
    out, sources, rows, text = [], None, [], path.read_text().splitlines()
    for number, line in prose_lines(path):
        line = text[number - 1] if line.startswith("|") else line  # a table's cells as written
        if line.startswith("|") and sources is not None:
            cells = markdown.cells(line)
            if not markdown.is_rule(cells):
                rows.append((number, cells))
            continue
        if rows:
            out.append((sources, rows))
            sources, rows = None, []
        m = RESTATES.search(line)
        if m:
            sources = [s.strip() for s in m.group(1).split(",")]
    if rows:
        out.append((sources, rows))
    return out


def check_restated() -> list[str]:
    """Every cell of a restated table states a cell of its source (at the same row and column, else anywhere
    in it), rounded as written; a row naming a published result (``et al.``, ``published``) is left out."""
    problems = []
    for path in prose_pages():
        rel = path.relative_to(ROOT)
        for sources, rows in _restated_tables(path):
            cells = []  # every (row label, column label, numbers, where) of the sources
            for source in sources:
                file, _, title = (p.strip() for p in source.partition(">"))
                if not (ROOT / file).is_file():
                    problems.append(f"{rel}:{rows[0][0]}: restates {file}, which does not exist")
                    continue
                for table_title, trows in markdown.tables(ROOT / file):
                    if title and title.lower() not in table_title.lower():
                        continue
                    head = trows[0][1]
                    for number, tcells in trows[1:]:
                        for k, cell in enumerate(tcells[1:], start=1):
                            label = head[k] if k < len(head) else ""
                            found = numbers(cell)
                            cells.append((_label(tcells[0]), _label(label), found, f"{file}:{number}"))
            head = rows[0][1]
            for number, wcells in rows[1:]:
                if PUBLISHED.search(wcells[0]):  # a published anchor beside the results: listed, not checked
                    continue
                for k, cell in enumerate(wcells[1:], start=1):
                    written = numbers(cell)
                    if not written:
                        continue
                    labels = {_label(wcells[0]), _label(head[k]) if k < len(head) else ""}

                    def states(found, written=written):
                        return len(found) >= len(written) and all(map(same, written, found))

                    at = [c for c in cells if {c[0], c[1]} == labels]
                    if any(states(c[2]) for c in at) or (not at and any(states(c[2]) for c in cells)):
                        continue
                    near = f", {at[0][3]} has {' '.join(at[0][2]) or 'none'}" if at else ""
                    problems.append(
                        f"{rel}:{number}: restated cell {wcells[0]!r} / {head[k] if k < len(head) else '?'!r} "
                        f"says {cell!r}, which no cell of {', '.join(sources)} states{near}"
                    )
    return problems


# ---------------------------------------------------------------- numbers no reference ties

UNTIED = Path("docs/results/unchecked_numbers.json")
VERSION = re.compile(r"\b(?:torch|dgl|DGL|[Pp]ython|CUDA|cuda)(?: (?:newer|older) than)?[ =]*v?\d+(?:\.\d+)+\S*")
STRING = re.compile(r"\"[^\"]*\"|'[^']*'")
RESULT_NUMBER = re.compile(r"(?<![\w.\-/=])−?\d+\.\d+(?![\w.]*[/_])")  # a decimal: how results are written
PUBLISHED = re.compile(
    r"et al\.|\b[A-Z][a-z]+ (?:&|and) [A-Z][a-z]+,? \(?(?:19|20)\d\d\b|\b(?:19|20)\d\d\b.*(?:table|paper|report)|\barXiv\b|published(?! (?:recipe|settings?|hyperparameters|arity))|BERT|Clark|Shen|Tai\b"
)
HARDWARE = re.compile(
    r"(?<!['’])\b(?:s|ms|min|h|GB|GiB|MiB|MB|cores?|threads?|CPU-hours|hours?|minutes?|seconds?|GPU|H100|load average)\b|×"
)


QUOTED = re.compile(r"<!--\s*quoted:\s*(\S.*?)\s*-->")  # "<!-- quoted: issue 32, measured on ... -->": a source
ITEM = re.compile(r"\s*(?:[-*+]|\d+\.) ")  # a list item starts a paragraph of its own


def _kind(text: str) -> str:
    return "published" if PUBLISHED.search(text) else "hardware" if HARDWARE.search(text) else "untied"


def _drop_first(found: list[tuple[str, str]], number: str) -> list[tuple[str, str]]:
    k = next((k for k, (n, _) in enumerate(found) if n == number), None)
    return found if k is None else found[:k] + found[k + 1 :]


PERCENT = re.compile(r"(?<![\w.,−-])(\d+)(?:\s*[–-]\s*(\d+))?\s?%")  # "26%", "20–23%": an integer share


def _following(line: str, at: int, skip: str = " ") -> list[re.Match]:
    """The comments (references, markers) right after position ``at`` of a line, with only ``skip``'s
    characters between."""
    out = []
    for c in COMMENT.finditer(line, at):
        if line[at : c.start()].strip(skip):
            break
        out.append(c)
        at = c.end()
    return out


def _integers(line: str) -> tuple[list[tuple[str, str]], set[int]]:
    """The integers of a line that restate a result as the prose writes one: "N of M" (``29 of 32 heads``,
    ``12 of the 13 cells``) and a share in percent (``26%``, ``20–23%``), each with its kind, where no reference
    ties it; and the positions of the references that tie them. After "N of M", the references right after
    it tie N, then M (``of_before``); in "N%" or "N–M%", a reference right after a number (or its ``%``) ties
    it. A ``<!-- config: WHERE -->`` among the comments right after them makes the rest ``config`` (what a
    setting fixes: a config's value or a count it implies, a test's level, the accuracy a standard error is
    worked out at; not a result); in a table row a number takes the kind of its cell and the row's label
    (``quoted`` where the cell carries the marker)."""
    blank, out, used = _blank(line), [], set()
    bars = [k for k, ch in enumerate(blank) if ch == "|"] if line.startswith("|") else []

    def kind_at(at: int) -> str:
        if len(bars) > 1:  # the cell the number stands in, and the row's label
            right = next((k for k in bars if k > at), len(line))
            left = max([k for k in bars if k < at], default=0)
            label = blank[bars[0] + 1 : bars[1]]
            return "quoted" if QUOTED.search(line[left + 1 : right]) else _kind(label + " " + blank[left:right])
        return _kind(blank)

    def add(numbers: list[str], at: int, after: list[re.Match], tied: list[bool]) -> None:
        config = any(CONFIG.match(c[0]) for c in after)
        used.update(c.start() for c in after if REF.match(c[0]))
        out.extend((n.replace(",", ""), "config" if config else kind_at(at)) for n, t in zip(numbers, tied) if not t)

    for m in OF.finditer(blank):
        after = _following(line, m.end(2))
        refs = sum(bool(REF.match(c[0])) for c in after)
        add([m[1], m[2]], m.start(), after, [refs > 0, refs > 1])
    for m in PERCENT.finditer(blank):
        groups = [g for g in (1, 2) if m[g]]
        after = _following(line, m.end(groups[-1]), " %")
        tied = [any(REF.match(c[0]) for c in _following(line, m.end(g), " %")) for g in groups]
        add([m[g] for g in groups], m.start(), after, tied)
        used.update(c.start() for c in _following(line, m.end(1), " %") if REF.match(c[0]))
    return out, used


def analysis_starts() -> dict[Path, int]:
    """The results pages under ``docs/results`` with a written analysis, and the line its first ``## `` heading
    is on: what is above it is a table that ``check_docs`` replays (or holds to its seal), what is below is
    prose that restates results. A page that a tool renders whole from JSON (``essay``, ``pretrained_graphs``)
    is replayed whole, so it has none."""
    whole = {t.table for t in replay.tables(ROOT) if not t.generated_only}
    out = {}
    for path in sorted((ROOT / seals.RESULTS).rglob("*.md")):
        if str(path.relative_to(ROOT)) in whole:
            continue
        start = next((k for k, line in enumerate(path.read_text().splitlines(), 1) if line.startswith("## ")), 0)
        if start:
            out[path] = start
    return out


def untied() -> dict[str, dict[str, list[str]]]:
    """The decimals, and the integers of an "N of M" or a percentage (``_integers``), of README, docs/*.md, the
    tutorials and the results pages' written analyses (``analysis_starts``) that no reference or restated table
    ties to a record, by page and by kind: ``published`` (a published anchor, cited on its line), ``quoted`` (a measurement made outside the repository, in the paragraph that a
    ``<!-- quoted: SOURCE -->`` line opens, or the table right after it, or in a table cell that carries the
    marker), ``hardware`` (a timing or machine fact on a line that says so), ``config`` (an integer that a
    setting fixes, marked ``<!-- config: SOURCE -->``), ``untied`` (a result restated without a reference)."""
    out: dict[str, dict[str, list[str]]] = {}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "tutorials").glob("*.py"))]
    analyses = analysis_starts()
    for path in pages + sorted(analyses):
        rel = str(path.relative_to(ROOT))
        restated = {n for _, rows in _restated_tables(path) for n, _ in rows}
        generated, quoting, previous, kinds = False, False, "", out.setdefault(rel, {})
        lines = path.read_text().splitlines()
        header = lines.index("# ---", 1) + 1 if lines[:1] == ["# ---"] and "# ---" in lines[1:] else 0  # jupytext's
        header = analyses.get(path, header)  # a results page: its written analysis only
        for number, line in prose_lines(path):
            generated = (generated or START in line) and END not in line
            # a quoted paragraph (one line carries the marker) and the table right after it, if any
            table_ended = previous.startswith("|") and not line.startswith("|")
            new_paragraph = (not previous.strip() or ITEM.match(line)) and line.strip() and not line.startswith("|")
            quoting = (quoting and not table_ended and not new_paragraph) or (
                bool(QUOTED.search(line)) and not line.startswith("|")  # in a table row: that cell only
            )
            previous = line
            if generated or number <= header or (number in restated and not PUBLISHED.search(line.split("|")[1])):
                continue
            text = REF.sub("", re.sub(r"\]\([^)]*\)", "]", line))  # link targets: no numbers
            text = CONFIG.sub("", QUOTED.sub("", text))  # nor markers
            text = VERSION.sub("", text)  # "torch 2.2.1", "dgl 2.1.0": versions, not results
            if path.suffix == ".py" and not line.lstrip().startswith("#"):
                if not REF.search(line):
                    continue  # a tutorial's code: its constants (figure sizes, tolerances) restate no result
                text = STRING.sub('""', text)  # a claim's line: the numbers in its strings are labels
            if line.startswith("|"):  # a table row: each cell's numbers by that cell and the row's label
                cells, marked = text.strip().strip("|").split("|"), line.strip().strip("|").split("|")
                found = [
                    (n, "quoted" if QUOTED.search(q) else _kind(cells[0] + " " + c))
                    for c, q in zip(cells, marked)
                    for n in RESULT_NUMBER.findall(c)
                ]
            else:
                found = [(n, _kind(line)) for n in RESULT_NUMBER.findall(text)]
            if path.suffix != ".py" or line.lstrip().startswith("#"):
                integers, used = _integers(line)
                found += integers
            else:
                used = set()
            for m in REF.finditer(line):  # the number a reference ties (both of a "mean ± std")
                if m.start() in used or of_before(line, m.start()):
                    continue  # it ties an integer (_integers)
                text_before = REF.sub("", line[: m.start()])
                pair = PAIR.search(text_before)
                for tied in pair.groups() if pair else RESULT_NUMBER.findall(text_before)[-1:]:
                    found = _drop_first(found, tied)
            for n, kind in found:
                kinds.setdefault("quoted" if quoting and kind != "config" else kind, []).append(n)
        if not kinds:
            del out[rel]
    return out


def write_untied() -> Path:
    data = {
        "about": (
            'Decimals, and integers written as "N of M" (29 of 32 heads) or as a share in percent (26%, 20–23%), in '
            "README, docs/*.md, the tutorials and the results pages' written analyses (below the first '## ' of a "
            "docs/results page whose table is replayed or sealed) that no `<!-- ref: -->` or `<!-- restates: -->` "
            "ties to a record "
            "(python -m tools.check_docs "
            "--write-untied; tests/tools/test_prose_numbers.py keeps it equal to the pages). published: a published "
            "anchor, cited on its line; quoted: a measurement made outside the repository, its source in the "
            "paragraph's (or table cell's) <!-- quoted: --> marker; hardware: a timing or machine fact; config: an "
            "integer that a setting fixes (a config's, a test's, the accuracy a standard error is worked out at), "
            "not a result, named in the <!-- config: --> marker right after it; "
            "untied: a result restated without a reference (to be tied, then dropped from here)."
        ),
        "pages": untied(),
    }
    tmp = (ROOT / UNTIED).with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(ROOT / UNTIED)
    return ROOT / UNTIED


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
    return (
        check_links()
        + headline.check(ROOT)
        + check_generated()
        + check_refs()
        + check_restated()
        + doc_counts.check(ROOT)
        + declared_checks()
    )


def declared_checks() -> list[str]:
    """The checks the studies declare beside their tables (``tools.replay.declared_checks``), a damaged input one
    line each."""
    problems = []
    for check in replay.declared_checks():
        try:
            problems += check(ROOT)
        except (ValueError, KeyError, TypeError) as e:  # a damaged or old-format input: one line, the check named
            problems.append(f"{check.__module__}.{check.__name__}: {type(e).__name__}: {e}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-headline", action="store_true", help="read the numbers again, rewrite README")
    parser.add_argument(
        "--seal",
        nargs=2,
        metavar=("TABLE", "RERUN"),
        help="hold a table whose per-run records are lost to its rows as they are now (RERUN: the command)",
    )
    parser.add_argument("--write-untied", action="store_true", help=f"list the numbers no reference ties in {UNTIED}")
    parser.add_argument(
        "--render",
        nargs="+",
        metavar="TABLE",
        help="write these replayed tables again from their committed sources (records or JSON), then check",
    )
    args = parser.parse_args(argv)
    for rel in args.render or []:
        try:
            print(f"wrote {replay.render(ROOT, rel).relative_to(ROOT)}")
        except (ValueError, FileNotFoundError) as e:  # sealed, not replayed, or its source lost: one line
            print(f"error: {e}", file=sys.stderr)
            return 2
    if args.write_untied:
        print(f"wrote {write_untied().relative_to(ROOT)}")
    if args.write_headline:
        try:
            print("\n".join(headline.write(ROOT)))
        except headline.Problem as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    if args.seal:
        seals.seal(ROOT, args.seal[0], args.seal[1])
        print(f"sealed the table rows of {args.seal[0]} in {seals.SEALED}")
    problems = check()
    for p in problems:
        print(p)
    replayed, sealed = table_counts()
    print(
        f"check_docs: {replayed} tables replayed from committed records, {len(sealed)} without per-run records "
        f"(sealed: {seals.SEALED})"
    )
    for line in experiment.progress(ROOT):
        print(f"check_docs: {line}")
    print(f"check_docs: {len(problems)} problem(s)" if problems else "check_docs: the docs agree with their evidence")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
