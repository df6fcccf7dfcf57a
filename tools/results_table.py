"""Collect ``results.json`` files under a directory into markdown tables and plots.

    python -m tools.results_table multirun/graph_choice                 # one sweep
    python -m tools.results_table multirun/heads --plot depth.png --curves curves.png
    python -m tools.results_table multirun --out results.md             # every sweep below

Runs are told apart by their command-line overrides (``.hydra/overrides.yaml``: ``experiment=heads``,
``model=gat``, ``model.num_heads=8``, ...); the settings that vary between runs are the table's
factors (settings made inside an experiment file are told apart by the experiment's name).
``graph`` becomes the columns when it varies, the other factors the rows; runs that differ only
in ``seed`` are averaged (mean ± std). Tables: test accuracy, training time and throughput,
accuracy by ListOps tree depth (``--plot`` draws it); ``--curves`` plots the training loss and
validation accuracy by epoch from the runs' ``metrics.csv``, seeds averaged.

``--out`` rewrites the generated tables and keeps what a person wrote below them: everything from the
file's first ``## `` heading on (the tables themselves never use one), so rerunning an experiment
refreshes its numbers without deleting the analysis that reads them. Drawn from run directories over a table
whose first line states more runs than they hold (a checkout without some of them), it stops with one line
instead (``engine.io.keep_committed``).
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import statistics
import sys
from pathlib import Path

import yaml

from tools import records

MIN_DEPTH_EXAMPLES = 10  # the depth plot leaves out depths rarer than this in the test split
DEEP = 5  # depths from here on are few per test split: pooled into one column
NOT_FACTORS = (
    "seed",
    "trainer.progress",
    "trainer.resume",
    "logger",
    "hparams_search",
    "cluster",
    "scale",
    "dataset.data_dir",  # where a dataset's files are: not a setting (dataset= is the factor)
)  # not compared


def _depth_buckets(r: dict) -> dict[str, tuple[int, float]]:
    """``{"1": (n, acc), ..., "5+": (n, acc)}`` from a run's test_by_depth."""
    pooled: dict[str, list] = {}
    for d, v in sorted(r["test_by_depth"].items(), key=lambda kv: int(kv[0])):
        key = d if int(d) < DEEP else f"{DEEP}+"
        pooled.setdefault(key, []).append((v["n"], v["acc"]))
    return {k: (sum(n for n, _ in vs), sum(n * a for n, a in vs) / sum(n for n, _ in vs)) for k, vs in pooled.items()}


def _settings(run_dir: Path, r: dict) -> dict[str, str]:
    """The run's command-line overrides as ``{key: value}``, plus its model and graph."""
    settings = {"model": r.get("model", "?"), "graph": r.get("graph", "?")}
    path = run_dir / ".hydra" / "overrides.yaml"
    if path.is_file():
        for item in yaml.safe_load(path.read_text()) or []:
            key, _, value = str(item).lstrip("+~").partition("=")
            if not key.startswith("hydra.") and key not in NOT_FACTORS:
                settings[key] = value
    return settings


def collect(root: Path) -> list[dict]:
    """Every run below ``root``, with ``_factors``: the settings that vary between the runs."""
    runs = []

    def job_order(path: Path):  # Hydra names sweep jobs <num>_...: sort 2 before 10
        num = path.parent.name.split("_")[0]
        return (str(path.parent.parent), int(num) if num.isdigit() else -1, str(path))

    for path in sorted(root.rglob("results.json"), key=job_order):
        with open(path) as f:
            r = json.load(f)
        r["_path"], r["_settings"] = str(path.parent), _settings(path.parent, r)
        r["_curve"] = records.curve_of(path.parent)
        runs.append(r)
    return _with_factors(runs)


def grid_keys(experiment: str) -> list[str]:
    """The settings ``conf/experiment/<experiment>.yaml``'s grids override, in the order the grids name them
    (``[]`` without such a file): the order a sweep's ``.hydra/overrides.yaml`` lists them in."""
    path = Path(__file__).resolve().parents[1] / "conf" / "experiment" / f"{experiment}.yaml"
    grids = (yaml.safe_load(path.read_text()) or {}).get("experiment_grids") if path.is_file() else None
    items = [item for grid in grids or [] if isinstance(grid, str) for item in shlex.split(grid)]
    return list(dict.fromkeys(item.lstrip("+~").partition("=")[0] for item in items))


def from_records(lines: list[dict], order: list[str] | tuple[str, ...] = ()) -> list[dict]:
    """The runs of committed records (``tools.records``), as ``collect`` gives them from run directories.

    Records keep their overrides sorted; ``order`` (``grid_keys``) puts the settings back in the order the
    experiment's grid named them, so the rows are labelled as in a table drawn from the run directories."""
    runs = []
    for line in lines:
        r = dict(line)
        settings = {"model": r.get("model", "?"), "graph": r.get("graph", "?")}
        items = [item.lstrip("+~").partition("=") for item in r["overrides"]]
        rank = {key: k for k, key in enumerate(order)}
        for key, _, value in sorted(items, key=lambda kv: rank.get(kv[0], len(rank))):  # stable: the rest sorted
            if not key.startswith("hydra.") and key not in NOT_FACTORS:
                settings[key] = value
        r["_path"], r["_settings"], r["_curve"] = "", settings, r.get("curve", [])
        runs.append(r)
    return _with_factors(runs)


def _with_factors(runs: list[dict]) -> list[dict]:
    """Give every run ``_factors``: its settings that vary between the runs."""
    keys = list(dict.fromkeys(k for r in runs for k in r["_settings"]))
    varying = [k for k in keys if len({r["_settings"].get(k, "–") for r in runs}) > 1]
    for r in runs:
        r["_factors"] = {k: r["_settings"].get(k, "–") for k in varying}
    return runs


@functools.cache
def known_names() -> dict[str, tuple[str, ...]]:
    """The usual order of table rows and columns: the registries' (an unregistered name sorts after them)."""
    from data.graphs import GRAPH_KINDS
    from models import model_names

    return {"model": tuple(model_names()), "graph": tuple(GRAPH_KINDS)}


def _sort_key(value: str, known=(), seen=()):
    """Known names in their usual order, then numbers by value, then other values as the sweep ran them."""
    if value in known:
        return (0, known.index(value), "")
    try:
        return (1, float(value), "")
    except ValueError:
        return (2, seen.index(value) if value in seen else len(seen), value)


def _layout(runs: list[dict]) -> tuple[list[str], list[tuple], list[str]]:
    """(row factor names, row keys, column values): graphs are columns when they vary."""
    factors = list(runs[0]["_factors"]) if runs else []
    row_factors = [f for f in factors if f != "graph"] or (["model"] if "graph" in factors else [])
    known = known_names()
    seen = {f: list(dict.fromkeys(r["_settings"].get(f, "–") for r in runs)) for f in row_factors}
    rows = sorted(
        {tuple(r["_settings"].get(f, "–") for f in row_factors) for r in runs},
        key=lambda key: [_sort_key(v, known.get(f, ()), seen[f]) for f, v in zip(row_factors, key)],
    )
    cols = sorted({r["graph"] for r in runs}, key=lambda g: _sort_key(g, known["graph"])) if "graph" in factors else []
    return row_factors, rows, cols


def label(r: dict) -> str:
    """A run's name in plots: its varying settings, short."""
    return ", ".join(f"{k.split('.')[-1]}={v}" if k not in ("model", "graph") else v for k, v in r["_factors"].items())


def _cell(values: list[float], fmt: str) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.mean(values))} ± {fmt.format(statistics.stdev(values))} (n={len(values)})"


def _runs_at(runs: list[dict], row_factors: list[str], row: tuple, col: str | None = None) -> list[dict]:
    """The runs of one table row (and graph column)."""
    return [
        r
        for r in runs
        if tuple(r["_settings"].get(f, "–") for f in row_factors) == row and (col is None or r["graph"] == col)
    ]


def _grid(runs: list[dict], title: str, value, fmt: str) -> list[str]:
    """One table: a row per table row, a column per graph (or one column), ``value(run)`` seeds averaged."""
    row_factors, rows, cols = _layout(runs)
    head = ", ".join(row_factors) or "run"
    columns = cols or [title.split(" (")[0].lower()]
    out = [f"**{title}**\n"]
    out.append(f"| {head} \\ graph | " + " | ".join(columns) + " |" if cols else f"| {head} | {columns[0]} |")
    out.append("|---|" + "---|" * len(columns))
    for row in rows:
        cells = [_cell([value(r) for r in _runs_at(runs, row_factors, row, c)], fmt) for c in (cols or [None])]
        out.append(f"| {', '.join(row) or 'all'} | " + " | ".join(cells) + " |")
    return out + [""]


def _breakdown(runs: list[dict], title: str, note: str, columns: dict[str, int], values, fmt: str) -> list[str]:
    """A table of per-run breakdowns: one row per table row and graph, one column per bucket
    (``columns``: bucket -> test examples), ``values(run) -> {bucket: accuracy}``, seeds averaged."""
    row_factors, rows, cols = _layout(runs)
    names = row_factors + (["graph"] if cols else [])
    out = [f"**{title}** ({note})\n"]
    out.append(f"| {' | '.join(names) or 'run'} | " + " | ".join(f"{k} (n={n})" for k, n in columns.items()) + " |")
    out.append("|---|" + "---|" * (max(1, len(names)) - 1 + len(columns)))
    for row in rows:
        for c in cols or [None]:
            rs = [v for v in (values(r) for r in _runs_at(runs, row_factors, row, c)) if v]
            if rs:
                cells = [_cell([v[k] for v in rs if k in v], fmt) for k in columns]
                out.append(f"| {' | '.join(list(row) + ([c] if c else [])) or 'all'} | " + " | ".join(cells) + " |")
    return out + [""]


def _breakdowns(runs: list[dict]) -> list[str]:
    """Test accuracy by tree depth, by length and by root operator, for the runs that measured them."""
    out = []
    if any(r.get("test_by_depth") for r in runs):
        counts = _depth_buckets(next(r for r in runs if r.get("test_by_depth")))
        out += _breakdown(
            runs,
            "Test accuracy by tree depth",
            f"depths {DEEP}+ pooled; n = test examples",
            {b: n for b, (n, _) in counts.items()},
            lambda r: {b: acc for b, (_, acc) in _depth_buckets(r).items()} if r.get("test_by_depth") else {},
            "{:.2f}",
        )
    if any(r.get("test_by_length") for r in runs):
        buckets: dict[str, int] = {}
        for r in runs:  # every bucket any run has, with its count (the runs of one table share a test split)
            for b, v in (r.get("test_by_length") or {}).items():
                buckets[b] = max(buckets.get(b, 0), v["n"])
        out += _breakdown(
            runs,
            "Test accuracy by length",
            "tokens; n = test examples",
            {b: buckets[b] for b in sorted(buckets, key=_bucket_start)},
            lambda r: {b: v["acc"] for b, v in (r.get("test_by_length") or {}).items()},
            "{:.3f}",
        )
    if any(r.get("test_by_root") for r in runs):
        first = next(r for r in runs if r.get("test_by_root"))["test_by_root"]
        groups = sorted(first, key=lambda k: (k == "digit", k))  # operators, then bare digits
        out += _breakdown(
            runs,
            "Test accuracy by root operator",
            "ListOps; n = test examples",
            {k: first[k]["n"] for k in groups},
            lambda r: {k: v["acc"] for k, v in (r.get("test_by_root") or {}).items()},
            "{:.3f}",
        )
    return out


def tables(runs: list[dict]) -> str:
    out = _grid(runs, "Test accuracy", lambda r: r["test_acc"], "{:.3f}")
    if all("best_val_acc" in r for r in runs):
        out += _grid(runs, "Best validation accuracy", lambda r: r["best_val_acc"], "{:.3f}")
    out += _grid(runs, "Training time (s)", lambda r: r["train_seconds"], "{:.0f}")
    out += _grid(runs, "Training throughput (examples/s)", lambda r: r["examples_per_second"], "{:.0f}")
    out += _breakdowns(runs)
    devices = sorted({r.get("device", "?") for r in runs})
    out.append(f"{len(runs)} runs, device {', '.join(devices)}, epochs {sorted({r['epochs'] for r in runs})}.")
    return "\n".join(out)


def _depth_points(r: dict) -> dict:
    """``{depth: (n, acc)}`` of a run's test split, as numbers."""
    return {int(d): (v["n"], v["acc"]) for d, v in (r.get("test_by_depth") or {}).items()}


def _length_points(r: dict) -> dict:
    """``{lower end of the length bucket: (n, acc)}``; the bucket names label the axis."""
    return {_bucket_start(b): (v["n"], v["acc"]) for b, v in (r.get("test_by_length") or {}).items()}


def _bucket_start(bucket: str) -> int:
    return int(bucket.lstrip(">").split("-")[0]) + bucket.startswith(">")


def _plot_breakdown(runs: list[dict], path: Path, points, xlabel: str, tick_names: dict | None = None) -> Path:
    """Test accuracy against a per-example quantity (``points(run) -> {x: (n, acc)}``): one line per graph
    and one panel per row of the table when graphs vary, else one line per run. Points with fewer than
    ``MIN_DEPTH_EXAMPLES`` test examples are noise and left out; seeds are averaged."""
    from tools.common import pyplot  # torch and matplotlib: only when a figure is drawn

    plt = pyplot()
    row_factors, rows, cols = _layout(runs)
    panels = rows if cols else [None]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), sharey=True, squeeze=False)
    colours = {g: f"C{i}" for i, g in enumerate(cols)}  # a graph keeps its colour in every panel
    for ax, row in zip(axes[0], panels):
        lines = cols if cols else sorted({label(r) for r in runs}, key=lambda s: [_sort_key(v) for v in s.split("=")])
        for line in lines:
            rs = [
                points(r)
                for r in runs
                if (
                    (tuple(r["_settings"].get(f, "–") for f in row_factors) == row and r["graph"] == line)
                    if cols
                    else label(r) == line
                )
            ]
            rs = [p for p in rs if p]
            if not rs:
                continue
            xs = sorted({x for p in rs for x, (n, _) in p.items() if n >= MIN_DEPTH_EXAMPLES})
            accs = [statistics.mean(p[x][1] for p in rs if x in p) for x in xs]
            ax.plot(xs, accs, marker="o", label=line or "all", color=colours.get(line))
        if tick_names:
            shown = sorted({x for line in ax.get_lines() for x in line.get_xdata()})
            ax.set_xticks(shown, [tick_names.get(x, str(x)) for x in shown], rotation=30, fontsize=8)
        ax.set(title=", ".join(row) if row else "", xlabel=f"{xlabel} (>= {MIN_DEPTH_EXAMPLES} test examples)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy")
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines()}  # every graph once, whichever panel has it
    title = "graph" if cols else None
    if cols or (len(handles) <= 4 and max(map(len, handles), default=0) <= 24):  # short: inside the last panel
        axes[0][-1].legend(handles.values(), handles.keys(), title=title, fontsize=8)
    else:  # many or long run names: beside the panels, never over the points
        fig.legend(handles.values(), handles.keys(), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_by_depth(runs: list[dict], path: Path) -> Path:
    """Test accuracy against tree depth (ListOps: the expression's; text: the dependency parse's)."""
    return _plot_breakdown(runs, path, _depth_points, "tree depth")


def plot_by_length(runs: list[dict], path: Path) -> Path:
    """Test accuracy against sentence length, by the length buckets of ``engine.evaluation``."""
    names = {_bucket_start(b): b for r in runs for b in (r.get("test_by_length") or {})}
    return _plot_breakdown(runs, path, _length_points, "length in tokens", names)


def _mean_by_epoch(curves: list[dict[int, float]]) -> tuple[list[int], list[float]]:
    """Per-epoch mean of several runs' ``{epoch: value}`` (an epoch some runs lack averages those that have it)."""
    epochs = sorted({e for c in curves for e in c})
    return epochs, [statistics.mean(c[e] for c in curves if e in c) for e in epochs]


def curve_groups(runs: list[dict]) -> dict[tuple, dict[str, tuple[list[int], list[float]]]]:
    """``{(panel, line): {"train_loss": (epochs, means), "val_acc": (epochs, means)}}`` from each run's
    ``metrics.csv``, seeds averaged. Panels are the table's rows and lines its graphs when graphs vary (a
    graph keeps its colour across panels); otherwise one panel, a line per setting."""
    row_factors, rows, cols = _layout(runs)
    per_line: dict[tuple, list[dict[str, dict[int, float]]]] = {}
    for r in runs:
        if not r.get("_curve"):
            continue
        series = {k: {int(m["epoch"]): float(m[k]) for m in r["_curve"]} for k in ("train_loss", "val_acc")}
        row = tuple(r["_settings"].get(f, "–") for f in row_factors)
        key = (", ".join(row), r["graph"]) if cols else ("", label(r) or "all")
        per_line.setdefault(key, []).append(series)
    order = {k: i for i, k in enumerate(", ".join(row) for row in rows)} if cols else {"": 0}
    lines = sorted(per_line, key=lambda k: (order.get(k[0], 0), _sort_key(k[1], known_names()["graph"])))
    return {
        k: {name: _mean_by_epoch([s[name] for s in per_line[k]]) for name in ("train_loss", "val_acc")} for k in lines
    }


def plot_curves(runs: list[dict], path: Path) -> Path:
    """Training loss and validation accuracy by epoch, seeds averaged (from ``metrics.csv``): a row of two
    panels per table row when graphs vary (one line per graph), else one row with a line per run setting."""
    from tools.common import pyplot  # torch and matplotlib: only when a figure is drawn

    plt = pyplot()
    groups = curve_groups(runs)
    panels = list(dict.fromkeys(p for p, _ in groups)) or [""]
    fig, axes = plt.subplots(len(panels), 2, figsize=(10, 2.6 * len(panels) + 0.8), sharex=True, squeeze=False)
    graphs = list(dict.fromkeys(line for _, line in groups))
    colours = {g: f"C{i % 10}" for i, g in enumerate(graphs)}
    for (panel, line), series in groups.items():
        loss_ax, acc_ax = axes[panels.index(panel)]
        for ax, name in ((loss_ax, "train_loss"), (acc_ax, "val_acc")):
            ax.plot(*series[name], label=line, color=colours[line], marker=".", markersize=3)
    for (loss_ax, acc_ax), panel in zip(axes, panels):
        loss_ax.set(ylabel="training loss", title=panel)
        acc_ax.set(ylabel="validation accuracy", title=panel)
        for ax in (loss_ax, acc_ax):
            ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("epoch")
    handles = {h.get_label(): h for row in axes for h in row[1].get_lines()}
    many = len(handles) > 12
    fig.legend(
        handles.values(),
        handles.keys(),
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        fontsize=7,
        ncol=2 if many else 1,
        title=None if panels == [""] else "graph",  # lines are graphs exactly when there are named panels
    )
    fig.suptitle("mean over seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def written_analysis(path: Path) -> str:
    """What a person wrote below the generated tables of ``path``: its text from the first line starting
    with ``## `` to the end ("" when the file or such a heading is missing)."""
    if not path.is_file():
        return ""
    lines = path.read_text().splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("## ")), None)
    return "" if start is None else "".join(lines[start:])


def load(root: Path) -> list[dict]:
    """The runs of a sweep directory (``results.json`` files below it) or of a records file (``.jsonl``)."""
    if root.suffix == ".jsonl":
        lines = [json.loads(line) for line in root.read_text().splitlines() if line.strip()]
        return from_records(lines, grid_keys(root.stem))
    return collect(root)


def render(runs: list[dict], root: Path | str, command: str | None) -> str:
    """The generated part of the table file: a line naming the command and the runs, then the tables."""
    text = tables(runs)
    if command:
        hours = sum(r.get("train_seconds", 0) for r in runs) / 3600
        text = f"Produced by `{command}` from `{root}` ({len(runs)} runs, {hours:.1f} h of training).\n\n{text}"
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "root", type=Path, help="a directory holding results.json files (searched recursively), or a records .jsonl"
    )
    parser.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    parser.add_argument("--plot", type=Path, help="also save accuracy by tree depth as this PNG")
    parser.add_argument("--curves", type=Path, help="also save training curves (loss, val accuracy) as this PNG")
    parser.add_argument("--lengths", type=Path, help="also save accuracy by sentence length as this PNG")
    parser.add_argument("--command", help="the command that made the runs, printed above the tables")
    args = parser.parse_args(argv)
    if not args.root.exists():
        print(f"error: {args.root} does not exist; run a sweep first (make sweep)", file=sys.stderr)
        return 2
    runs = load(args.root)
    if args.out and args.root.is_dir() and args.out.is_file():  # run directories over a table: not fewer runs
        from engine.io import keep_committed  # torch: not needed to draw a table from records (tools.experiment)

        scale = "scale=small " if args.out.parent.name == "small" else ""
        keep_committed(
            args.out,
            len(runs),
            args.root,
            "its table stays; draw it from its committed records instead "
            f"(make experiment E={args.out.stem} ARGS='{scale}--table-only')",
        )
    if not runs:
        print(f"error: no results.json under {args.root}; runs write one when they finish", file=sys.stderr)
        return 2
    for path in (args.out, args.plot, args.curves, args.lengths):  # docs/results/small/... may not exist yet
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
    text = render(runs, args.root, args.command)
    print(text)
    if args.out:
        analysis = written_analysis(args.out)
        args.out.write_text(text + "\n" + (f"\n{analysis}" if analysis else ""))
        if analysis:
            print(f"kept the written analysis of {args.out} ({analysis.count(chr(10))} lines from its first '## ')")
    if args.plot:
        print(f"saved {plot_by_depth(runs, args.plot)}")
    if args.curves:
        print(f"saved {plot_curves(runs, args.curves)}")
    if args.lengths:
        print(f"saved {plot_by_length(runs, args.lengths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
