"""The essay's questions, run and answered: ``make essay`` (``make essay SMALL=1`` in under an hour).

    python -m studies.essay                      # every essay experiment at scale=full, then the answers
    python -m studies.essay scale=small          # the same grids on 3k expressions, 5 epochs
    python -m studies.essay --table-only         # the answers again, from the runs already there
                                                 # (run directories, else committed records, else carried)
    python -m studies.essay --only heads,aggregation

Each experiment runs through ``tools.experiment`` (its grids, its table, its analysis). Then every
comparison the essay's write-up makes (``COMPARISONS``) is judged by the one rule of ``tools.stats``
(``docs/statistics.md``): difference = mean(A) - mean(B) over seeds, noise = Student's t times the standard error
that counts each cell's own seeds and the test examples (paired over examples where both cells kept their
predictions, else unpaired and not divided by the seeds). A difference beyond the noise is a finding; inside it
the answer is "no difference measurable here"; one seed a side is not judged.
Written to ``docs/results/[small/]essay.md`` and ``essay.json`` (per-seed accuracies and the rule's parts
included, so a reader, or tutorial 05, can recompute every verdict).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from tools import experiment, records, stats
from tools.replay import Table
from tools.results_table import collect, from_records, grid_keys

ROOT = Path(__file__).resolve().parents[2]
PARTLY = "records, partly carried"  # an experiment whose records do not yet hold every cell its carried rows read
EXPERIMENTS = (
    "graph_choice",
    "graph_choice_depth",
    "neural_syntax",
    "heads",
    "aggregation",
    "positional",
    "training",
    "training_lr",
)


def _comparisons() -> list[tuple[str, str, dict, dict]]:
    """(experiment, what is compared, cell A, cell B): A - B is reported."""
    out = []
    for m in ("transformer", "gat", "gcn"):
        out.append(
            ("graph_choice", f"{m}: tree - complete", {"model": m, "graph": "tree"}, {"model": m, "graph": "complete"})
        )
        for g in ("window", "knn", "none"):
            out.append(
                ("graph_choice", f"{m}: complete - {g}", {"model": m, "graph": "complete"}, {"model": m, "graph": g})
            )
        # the old ranking's second step: does a learned neighbourhood beat none at all?
        out.append(("graph_choice", f"{m}: knn - none", {"model": m, "graph": "knn"}, {"model": m, "graph": "none"}))
    for g in ("complete", "tree"):
        for deep, shallow in (("4", "2"), ("8", "4"), ("12", "8")):
            a, b = {"graph": g, "model.num_layers": deep}, {"graph": g, "model.num_layers": shallow}
            out.append(("graph_choice_depth", f"{g}: {deep} - {shallow} tied layers", a, b))
    for h in ("1", "2", "8"):
        out.append(("heads", f"{h} - 4 heads", {"model.num_heads": h}, {"model.num_heads": "4"}))
    for g in ("complete", "tree"):
        for agg in ("sum", "mean", "max"):
            a, b = {"model": "transformer", "graph": g}, {"model": agg, "graph": g}
            out.append(("aggregation", f"{g}: attention - {agg}", a, b))
        for first, second in (("mean", "sum"), ("max", "sum"), ("max", "mean")):  # is one reduction best?
            a, b = {"model": first, "graph": g}, {"model": second, "graph": g}
            out.append(("aggregation", f"{g}: {first} - {second}", a, b))
    for g in ("complete", "tree"):
        for pe in ("lap_pe", "random_walk_pe", "none"):
            a, b = {"model.positional": pe, "graph": g}, {"model.positional": "sinusoidal", "graph": g}
            out.append(("positional", f"{g}: {pe} - sinusoidal", a, b))
        for pe in ("lap_pe", "random_walk_pe"):  # does the tree's structure, as an encoding, add to none at all?
            a, b = {"model.positional": pe, "graph": g}, {"model.positional": "none", "graph": g}
            out.append(("positional", f"{g}: {pe} - none", a, b))
    for exp, extra in (("training", {"model.scaled": "True"}), ("training_lr", {})):
        for w in ("0.0", "0.05"):
            a = {"model.norm": "pre", "optim.warmup_ratio": w, **extra}
            b = {"model.norm": "post", "optim.warmup_ratio": w, **extra}
            out.append((exp, f"pre-LN - post-LN, warmup {w}", a, b))
        for norm in ("pre", "post"):
            a = {"model.norm": norm, "optim.warmup_ratio": "0.05", **extra}
            b = {"model.norm": norm, "optim.warmup_ratio": "0.0", **extra}
            out.append((exp, f"{norm}-LN: warmup 0.05 - none", a, b))
    for norm in ("pre", "post"):
        a = {"model.norm": norm, "optim.warmup_ratio": "0.0", "model.scaled": "True"}
        b = {"model.norm": norm, "optim.warmup_ratio": "0.0", "model.scaled": "False"}
        out.append(("training", f"{norm}-LN: scaled - unscaled dot product", a, b))
    return out


COMPARISONS = _comparisons()


def cells(runs: list[dict]) -> dict[tuple, list[dict]]:
    """Runs grouped by every setting but the seed."""
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault(tuple(sorted(r["_settings"].items())), []).append(r)
    return groups


def matching(runs: list[dict], want: dict) -> list[dict]:
    """The runs whose settings include ``want``."""
    return [r for r in runs if all(r["_settings"].get(k) == v for k, v in want.items())]


def judged(a: stats.Cell, b: stats.Cell) -> dict:
    """A row's verdict by ``tools.stats.compare``, as essay.json keeps it."""
    return stats.compare(a, b).as_dict()


def runs_of(prefix: str, name: str) -> tuple[list[dict] | None, str]:
    """An experiment's runs and where they come from: its run directories (``multirun/<prefix><name>``), or its
    committed records (``docs/results/runs/<prefix><name>.jsonl``) where those hold more runs (a fresh clone,
    or a machine that trained only a part with ``--missing``), else ``(None, "")``."""
    root = ROOT / "multirun" / f"{prefix}{name}"
    here = collect(root) if root.is_dir() else []
    path = ROOT / records.RUNS / f"{prefix}{name}.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
    if lines and len(lines) > len(here):
        return from_records(lines, grid_keys(name)), "records"
    return (here, "run directories") if here else (None, "")


def answers(prefix: str = "", previous: dict | None = None) -> dict:
    """Judge every comparison from each experiment's runs (``runs_of``). An experiment with neither run
    directories nor records keeps its rows and compute from ``previous`` (the essay.json written before),
    when that holds any of its runs: it is *carried*, judged again from its rows' accuracies (no predictions:
    the unpaired rule), and ``sources`` says so.

    An experiment whose records are coming in part by part (``tools.queue``) while its rows were carried is
    *partly carried*: a row both of whose cells the records hold is scored from them; a row with a cell they do
    not hold yet keeps its carried accuracies (marked ``carried``), and the runs those came from stay in the
    experiment's compute (``carried_compute``) until no row is carried."""
    previous = previous or {}
    kept = {r["experiment"] for r in previous.get("comparisons", []) if r["a_acc"] or r["b_acc"]}
    kept |= {name for name, c in previous.get("compute", {}).items() if c["runs"]}
    before = {(r["experiment"], r["compared"]): r for r in previous.get("comparisons", [])}
    runs_by_exp, sources = {}, {}
    for name in EXPERIMENTS:
        runs, source = runs_of(prefix, name)
        if runs is None and name in kept:
            sources[name] = "carried"
        else:
            runs_by_exp[name], sources[name] = runs or [], source or "none"
    carried = [name for name in EXPERIMENTS if sources[name] == "carried"]
    every = [r for runs in runs_by_exp.values() for r in runs]
    sizes = [n for n in map(stats.test_size, every) if n] or [previous.get("test_examples") or 0]
    test_examples = min(sizes) or None  # the carried rows' test split: the suite's
    rows, partly = [], set()
    for exp, what, a_want, b_want in COMPARISONS:
        old = before.get((exp, what))
        if exp in carried and old is None:
            continue
        runs = runs_by_exp.get(exp, [])
        a, b = matching(runs, a_want), matching(runs, b_want)
        then = previous.get("sources", {}).get(exp)  # a row carried before: its experiment was, or the row was
        carry = exp in carried or (
            not (a and b) and old is not None and (then == "carried" or (then == PARTLY and old.get("carried")))
        )
        if carry:
            cells = (stats.Cell(old[side], n=test_examples) for side in ("a_acc", "b_acc"))
            rows.append({**{k: old[k] for k in ("experiment", "compared", "a", "b", "a_acc", "b_acc")}})
            rows[-1].update(judged(*cells), carried=True)
            partly |= {exp} - set(carried)
            continue
        row = {"experiment": exp, "compared": what, "a": a_want, "b": b_want}
        row.update(a_acc=[r["test_acc"] for r in a], b_acc=[r["test_acc"] for r in b])
        row.update(judged(stats.cell_of(a, test_examples), stats.cell_of(b, test_examples)))
        rows.append(row)
    compute = {
        name: {"runs": len(runs), "train_hours": sum(r.get("train_seconds", 0) for r in runs) / 3600}
        for name, runs in runs_by_exp.items()
    }
    compute.update({name: previous["compute"][name] for name in carried})
    was = previous.get("sources", {})
    carried_compute = {  # the earlier runs a partly carried experiment's carried rows come from
        name: previous["compute"][name] if was.get(name) == "carried" else previous["carried_compute"][name]
        for name in sorted(partly)
    }
    for name, c in carried_compute.items():
        sources[name] = PARTLY
        compute[name] = {k: compute[name][k] + c[k] for k in ("runs", "train_hours")}
    unique = {records.identity(r) for r in every}  # a run copied into several experiments, once
    earlier = [previous["compute"][name] for name in carried] + list(carried_compute.values())
    result = {
        "suite": prefix.rstrip("/") or "full",
        "unique_runs": {
            "runs": len(unique) + sum(c["runs"] for c in earlier),
            "train_hours": (sum(t or 0 for _, t in unique) + sum(c["train_hours"] * 3600 for c in earlier)) / 3600,
        },
        "test_examples": test_examples,
        "comparisons": rows,
        "compute": compute,
    }
    if carried_compute:
        result["carried_compute"] = carried_compute
    if any(source != "run directories" for source in sources.values()):
        result["sources"] = sources
    return result


def _acc(values: list[float]) -> str:
    if not values:
        return "–"
    sd = f" ± {statistics.stdev(values):.3f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.3f}{sd} (n={len(values)})"


def report(result: dict, command: str, wall: float | None = None) -> str:
    lines = [
        f"Produced by `{command}` (suite `{result['suite']}`). A is the first setting named, B the second;",
        "difference = mean(A) - mean(B) over seeds, in points of test accuracy. Noise: the threshold of the one rule",
        f"([docs/statistics.md]({'../' * (2 if result['suite'] != 'full' else 1)}statistics.md), `tools.stats`), Student's t at 5% times the standard error that counts",
        "each cell's own seeds and the test examples; rule `paired`: over the examples both cells kept predictions for,",
        f"`unpaired`: no predictions, each cell's binomial error on the {result['test_examples'] or '?'} test examples, not",
        "divided by the seeds (conservative).",
        "",
        "| experiment | A - B | A | B | difference | noise | rule | answer |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["comparisons"]:
        diff = "–" if r["diff"] is None else f"{100 * r['diff']:+.1f}"
        noise = "–" if r["noise"] is None else f"{100 * r['noise']:.1f}"
        answer = {"A higher": "**A higher**", "B higher": "**B higher**"}.get(r["verdict"], r["verdict"])
        lines.append(
            f"| {r['experiment']} | {r['compared']} | {_acc(r['a_acc'])} | {_acc(r['b_acc'])} | {diff} | {noise} "
            f"| {', '.join(x for x in (r.get('rule'), r.get('carried') and 'carried') if x) or '–'} | {answer} |"
        )
    lines += ["", "**Compute** (training time summed over runs, one CPU thread per run)", ""]
    lines += ["| experiment | runs | training hours |", "|---|---|---|"]
    order = {name: k for k, name in enumerate(EXPERIMENTS)}  # essay.json stores its keys sorted
    for name, c in sorted(result["compute"].items(), key=lambda item: order.get(item[0], len(order))):
        lines.append(f"| {name} | {c['runs']} | {c['train_hours']:.2f} |")
    unique, sources = result["unique_runs"], result.get("sources", {})
    carried = [name for name, source in sources.items() if source in ("carried", PARTLY)]
    label = "a run directory copied into several experiments counts once"
    if carried:
        label = "a run copied into several experiments counts once, except among the carried ones"
    lines.append(f"| **all** ({label}) | {unique['runs']} | {unique['train_hours']:.2f} |")
    if sources:
        by_source = {}
        for name in sorted(sources, key=lambda name: order.get(name, len(order))):  # essay.json sorts its keys
            by_source.setdefault(sources[name], []).append(name)
        why = {
            "run directories": "scored from their run directories (`multirun/`)",
            "records": "scored from their committed per-run records (`docs/results/runs/`)",
            "carried": "carried from the essay.json before: neither their run directories nor records are here",
            PARTLY: "scored from their committed records where those hold both cells of a row; the rows marked "
            "`carried` keep the essay.json before's accuracies until they do, and their earlier runs stay in the compute",
            "none": "not run",
        }
        lines += ["", "**Sources**", ""]
        lines += [f"- {why[source]}: {', '.join(names)}" for source, names in by_source.items()]
    if wall is not None:
        lines += [
            "",
            f"Wall time of the last `make essay{' SMALL=1' if result['suite'] == 'small' else ''}` that ran the grids: {wall / 60:.1f} min.",
        ]
    return "\n".join(lines)


def table_from_json(data: dict) -> str:
    """``essay.md`` from the ``essay.json`` written beside it (``tools.check_docs`` compares the two)."""
    small = " SMALL=1" if data["suite"] == "small" else ""
    return report(data, f"make essay{small}", data.get("wall_seconds"))


# the tables tools.check_docs replays: essay.md from the essay.json written beside it, at full scale and at
# scale=small (make essay SMALL=1)
REPLAYS = [
    Table(
        f"docs/results/{d}essay.md", (f"docs/results/{d}essay.json",), table_from_json, "studies.essay.table_from_json"
    )
    for d in ("", "small/")
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for every run (scale=small)")
    parser.add_argument("--table-only", action="store_true", help="only score the runs already there")
    parser.add_argument("--only", help="comma-separated experiments to run (default: all)")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(EXPERIMENTS)
    unknown = sorted(set(names) - set(EXPERIMENTS))
    if unknown:
        raise SystemExit(f"error: not an essay experiment: {', '.join(unknown)}; valid: {', '.join(EXPERIMENTS)}")
    prefix = experiment.suite_dir(args.overrides)
    start = time.perf_counter()
    if not args.table_only:
        for name in names:
            if experiment.main([name, *args.overrides]):
                return 1
    wall = None if args.table_only else time.perf_counter() - start
    out = ROOT / "docs" / "results" / prefix
    previous = json.loads((out / "essay.json").read_text()) if (out / "essay.json").is_file() else None
    result = answers(prefix, previous)
    for name, source in result.get("sources", {}).items():
        print(f"{name}: {source} ({result['compute'][name]['runs']} runs)", flush=True)
    if wall is None and previous:  # the table again: keep the last full run's wall time
        wall = previous.get("wall_seconds")
    text = table_from_json({**result, "wall_seconds": wall})
    out.mkdir(parents=True, exist_ok=True)
    (out / "essay.md").write_text(text + "\n")
    from engine.io import write_json  # torch: not needed to render a table (check_docs)

    write_json(out / "essay.json", {**result, "wall_seconds": wall})
    print(text)
    return 0
