"""Collect ``results.json`` files under a directory into markdown tables (model x graph).

    python -m tools.results_table multirun/2026-11-22/20-00-00          # one sweep
    python -m tools.results_table multirun --out results.md             # every sweep below

Cells are test accuracy (mean ± std over seeds when a cell has several runs); a second table
gives training time and throughput; a third, accuracy by ListOps tree depth (``--plot`` draws it).
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


DEEP = 5  # depths from here on are few per test split: pooled into one column


def _depth_buckets(r: dict) -> dict[str, tuple[int, float]]:
    """``{"1": (n, acc), ..., "5+": (n, acc)}`` from a run's test_by_depth."""
    pooled: dict[str, list] = {}
    for d, v in sorted(r["test_by_depth"].items(), key=lambda kv: int(kv[0])):
        key = d if int(d) < DEEP else f"{DEEP}+"
        pooled.setdefault(key, []).append((v["n"], v["acc"]))
    return {k: (sum(n for n, _ in vs), sum(n * a for n, a in vs) / sum(n for n, _ in vs)) for k, vs in pooled.items()}


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
    if any(r.get("test_by_depth") for r in runs):
        out.append(f"**Test accuracy by tree depth** (depths {DEEP}+ pooled; n = test examples)\n")
        counts = _depth_buckets(next(r for r in runs if r.get("test_by_depth")))
        out.append("| model | graph | " + " | ".join(f"{b} (n={n})" for b, (n, _) in counts.items()) + " |")
        out.append("|---|---|" + "---|" * len(counts))
        for m in models:
            for g in graphs:
                rs = [_depth_buckets(r) for r in by[(m, g)] if r.get("test_by_depth")]
                if rs:
                    cells = [_cell([b[k][1] for b in rs if k in b], "{:.2f}") for k in counts]
                    out.append(f"| {m} | {g} | " + " | ".join(cells) + " |")
        out.append("")
    devices = sorted({r.get("device", "?") for r in runs})
    out.append(f"{len(runs)} runs, device {', '.join(devices)}, epochs {sorted({r['epochs'] for r in runs})}.")
    return "\n".join(out)


def plot_by_depth(runs: list[dict], path: Path) -> Path:
    """One panel per model, one line per graph: test accuracy against ListOps tree depth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = _order({r["model"] for r in runs}, MODELS)
    graphs = _order({r["graph"] for r in runs}, GRAPHS)
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), sharey=True, squeeze=False)
    for ax, m in zip(axes[0], models):
        for g in graphs:
            rs = [r for r in runs if (r["model"], r["graph"]) == (m, g) and r.get("test_by_depth")]
            if not rs:
                continue
            depths = sorted({int(d) for r in rs for d in r["test_by_depth"]})
            accs = [
                statistics.mean(r["test_by_depth"][str(d)]["acc"] for r in rs if str(d) in r["test_by_depth"])
                for d in depths
            ]
            ax.plot(depths, accs, marker="o", label=g)
        ax.set(title=m, xlabel="tree depth (operators on the longest path)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy")
    axes[0][-1].legend(title="graph")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a directory holding results.json files (searched recursively)")
    parser.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    parser.add_argument("--plot", type=Path, help="also save accuracy by tree depth as this PNG")
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
    if args.plot:
        print(f"saved {plot_by_depth(runs, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
