"""The table of ``experiment=listops_best``: 3 seeds, their per-operator accuracies and the evaluate.py columns.

    python -m studies.listops_best                               # docs/results/listops_best.md from listops_best.json
    python -m studies.listops_best --runs multirun/listops_best  # read the runs first, then write both

``make experiment E=listops_best`` trains the three seeds into ``multirun/listops_best/<n>_seed<s>`` and then
runs this with ``--runs``. Each seed's ``results.json`` gives the test, per-operator, validation and time
columns. The two published-layout columns come from ``evaluate.py``'s ``eval.json`` in the run's
``eval_published/`` and ``eval_unseen/`` (the commands are in the table's header); a seed without them
keeps the values already in ``listops_best.json``.

``docs/results/listops_best.json`` holds the per-seed numbers; ``docs/results/listops_best.md`` is
``table_from_json`` of it, and ``python -m tools.check_docs`` fails when the two disagree.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from tools.replay import Table

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "results" / "listops_best"
OPS = ("[MAX", "[MIN", "[MED", "[SM")
EVALS = {"published": "eval_published", "unseen": "eval_unseen"}


def _mean_sd(values: list[float], digits: int = 2) -> str:
    if len(values) < 2:
        return f"{values[0]:.{digits}f}" if values else "–"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def table_from_json(data: dict) -> str:
    """The markdown table of ``listops_best.json``."""
    seeds = data["seeds"]
    head = ["seed", "test acc", *OPS, "best val", "best epoch", "train s"]
    head += ["published-layout file", "unseen-only file", "unseen [SM"]
    lines = [*data["header"], "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in seeds:
        cells = [str(s["seed"]), f"{s['test_acc']:.2f}", *(f"{s['by_root'][op]:.2f}" for op in OPS)]
        cells += [f"{s['best_val_acc']:.1f}", str(s["best_epoch"]), str(s["train_seconds"])]
        cells += [f"{s['published_acc']:.2f}", f"{s['unseen_acc']:.2f}", f"{s['unseen_by_root']['[SM']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")

    def col(get):
        return [get(s) for s in seeds]

    summary = ["**mean ± std**", f"**{_mean_sd(col(lambda s: s['test_acc']))}**"]
    summary += [_mean_sd(col(lambda s, op=op: s["by_root"][op])) for op in OPS]
    summary += ["", "", str(round(statistics.mean(col(lambda s: s["train_seconds"]))))]
    summary += [
        _mean_sd(col(lambda s: s["published_acc"])),
        _mean_sd(col(lambda s: s["unseen_acc"])),
        _mean_sd(col(lambda s: s["unseen_by_root"]["[SM"])),
    ]
    lines.append("| " + " | ".join(summary) + " |")
    first = seeds[0]
    if "root_n" in first:
        counts = ", ".join(f"{op} {first['root_n'][op]}" for op in OPS)
        lines += [
            "",
            f"Test examples by root operator (seed {first['seed']}'s test split): {counts}, "
            f"bare digits {first['root_n'].get('digit', 0)}.",
        ]
    lines += ["", *data["footer"]]
    if "by_depth" in first:
        depths = ", ".join(
            f"{k}: {v['acc']:.1f} (n={v['n']})" for k, v in sorted(first["by_depth"].items(), key=lambda kv: int(kv[0]))
        )
        lines += ["", f"Seed {first['seed']}, test accuracy by depth: {depths}."]
    return "\n".join(lines)


def read_runs(runs: Path, data: dict) -> dict:
    """``data`` with each seed's columns read again from ``runs/*_seed<s>/results.json`` (and eval.json)."""
    by_seed = {s["seed"]: s for s in data["seeds"]}
    for results in sorted(runs.glob("*/results.json")):
        r = json.loads(results.read_text())
        seed = by_seed.setdefault(r["seed"], {"seed": r["seed"]})
        seed.update(
            test_acc=100 * r["test_acc"],
            by_root={op: 100 * r["test_by_root"][op]["acc"] for op in OPS},
            best_val_acc=100 * r["best_val_acc"],
            best_epoch=r["best_epoch"],
            train_seconds=round(r["train_seconds"]),
            by_depth={k: {"acc": 100 * v["acc"], "n": v["n"]} for k, v in r["test_by_depth"].items()},
            root_n={op: v["n"] for op, v in r["test_by_root"].items()},
        )
        for key, sub in EVALS.items():
            ev = results.parent / sub / "eval.json"
            if ev.is_file():
                e = json.loads(ev.read_text())
                seed[f"{key}_acc"] = 100 * e["accuracy"]
                if key == "unseen":
                    seed["unseen_by_root"] = {op: 100 * e["by_root"][op]["acc"] for op in OPS if op in e["by_root"]}
    missing = [s for s in by_seed.values() if "published_acc" not in s or "unseen_acc" not in s]
    if missing:
        raise ValueError(
            f"seed {missing[0]['seed']} has no evaluate.py columns: run evaluate.py into "
            f"{runs}/<run>/{EVALS['published']} and {EVALS['unseen']} (see the table's header)"
        )
    return {**data, "seeds": [by_seed[k] for k in sorted(by_seed)]}


# the table tools.check_docs replays: listops_best.md from the listops_best.json written beside it
REPLAYS = [
    Table(
        "docs/results/listops_best.md",
        ("docs/results/listops_best.json",),
        table_from_json,
        "studies.listops_best.table_from_json",
    )
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, help="read the seeds' results.json from here first")
    parser.add_argument(
        "--out", type=Path, default=OUT, help="where the .json and .md go (default docs/results/listops_best)"
    )
    args = parser.parse_args(argv)
    source = OUT.with_suffix(".json")
    if not source.is_file():
        print(f"error: {source} is missing: run with --runs multirun/listops_best", file=sys.stderr)
        return 2
    data = json.loads(source.read_text())
    if args.runs:
        try:
            data = read_runs(args.runs, data)
        except (ValueError, KeyError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    from engine.io import write_json  # torch: not needed to render a table (check_docs)

    write_json(args.out.with_suffix(".json"), data)
    text = table_from_json(data)
    args.out.with_suffix(".md").write_text(text + "\n")
    print(text)
    return 0
