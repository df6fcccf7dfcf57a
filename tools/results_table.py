"""Collect ``results.json`` files under a directory into markdown tables (model x graph).

    python -m tools.results_table multirun/2026-11-22/20-00-00          # one sweep
    python -m tools.results_table multirun --out results.md             # every sweep below

Cells are test accuracy (mean ± std over seeds when a cell has several runs); a second table
gives training time and throughput; a third, accuracy by ListOps tree depth.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

MODELS = ("gcn", "gat", "transformer")
GRAPHS = ("complete", "tree", "window", "knn", "none")


def collect(root: Path) -> list[dict]:
    runs = []
    for path in sorted(root.rglob("results.json")):
        with open(path) as f:
            r = json.load(f)
        r["_path"] = str(path.parent)
        runs.append(r)
    return runs


def _cell(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.mean(values))} ± {fmt.format(statistics.stdev(values))} (n={len(values)})"


def _order(names, known):
    return [n for n in known if n in names] + sorted(n for n in names if n not in known)


def tables(runs: list[dict]) -> str:
    by = defaultdict(list)
    for r in runs:
        by[(r["model"], r["graph"])].append(r)
    models = _order({m for m, _ in by}, MODELS)
    graphs = _order({g for _, g in by}, GRAPHS)
    out = []

    def grid(title, value, fmt):
        out.append(f"**{title}**\n")
        out.append("| model \\ graph | " + " | ".join(graphs) + " |")
        out.append("|---|" + "---|" * len(graphs))
        for m in models:
            out.append(f"| {m} | " + " | ".join(_cell([value(r) for r in by[(m, g)]], fmt) for g in graphs) + " |")
        out.append("")

    grid("Test accuracy", lambda r: r["test_acc"], "{:.3f}")
    grid("Training time (s)", lambda r: r["train_seconds"], "{:.0f}")
    grid("Training throughput (examples/s)", lambda r: r["examples_per_second"], "{:.0f}")
    depths = sorted({d for r in runs for d in (r.get("test_by_depth") or {})}, key=int)
    if depths:
        out.append("**Test accuracy by tree depth** (n = test examples at that depth)\n")
        counts = {
            d: next((r["test_by_depth"][d]["n"] for r in runs if d in (r.get("test_by_depth") or {})), 0)
            for d in depths
        }
        out.append("| model | graph | " + " | ".join(f"{d} (n={counts[d]})" for d in depths) + " |")
        out.append("|---|---|" + "---|" * len(depths))
        for m in models:
            for g in graphs:
                rs = by[(m, g)]
                if rs:
                    cells = [
                        _cell(
                            [r["test_by_depth"][d]["acc"] for r in rs if d in (r.get("test_by_depth") or {})], "{:.2f}"
                        )
                        for d in depths
                    ]
                    out.append(f"| {m} | {g} | " + " | ".join(cells) + " |")
        out.append("")
    devices = sorted({r.get("device", "?") for r in runs})
    out.append(f"{len(runs)} runs, device {', '.join(devices)}, epochs {sorted({r['epochs'] for r in runs})}.")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a directory holding results.json files (searched recursively)")
    parser.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    args = parser.parse_args(argv)
    if not args.root.exists():
        print(f"error: {args.root} does not exist; run a sweep first (make sweep)", file=sys.stderr)
        return 2
    runs = collect(args.root)
    if not runs:
        print(f"error: no results.json under {args.root}; runs write one when they finish", file=sys.stderr)
        return 2
    text = tables(runs)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
