"""The table of ``make experiment E=pretrained_graphs``: fine-tuned MiniLM per dataset x graph, every planned
cell shown, "not run yet" where no run finished.

    python -m studies.pretrained_graphs                      # multirun/pretrained_graphs -> docs/results/pretrained_graphs.{md,json}
    python -m studies.pretrained_graphs --runs DIR --out DIR --figures DIR

The planned cells are read from ``conf/experiment/pretrained_graphs.yaml``'s grids (a cell: dataset, graph,
other overrides; its seeds). A finished run is one with ``results.json``; a run still training shows its
last finished epoch from ``metrics.csv``. A graph's difference to the complete graph is judged by
``tools.stats.compare`` (docs/statistics.md): paired over the test sentences where both cells' runs kept
their per-example predictions on one test split, else unpaired (each cell's binomial test error); the table
names the rule of each row, and ``comparisons`` in the JSON holds every verdict. A single run's "test
noise" is two binomial standard errors of its test accuracy p on n sentences, 2 sqrt(p (1 - p) / n): a
description of one number, not a comparison.

    python -m studies.pretrained_graphs --table-only   # the table and the JSON's verdicts again from the
                                                       # committed docs/results/pretrained_graphs.json

A checkout without the run directories adds ``--table-only``: without it the command stops rather than write a
table of fewer runs over the committed one (``engine.io.keep_committed``).

A run fine-tuned on GLUE SST-2's phrases (``dataset=sst2``) is also scored on binary SST's val and test
sentences (``evaluate.py dataset=sst_binary``, run here once and kept in the run's ``eval/``), so that the
choice between training on sentences and on phrases is made on binary SST's validation split.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from tools.replay import Table, judged_as_committed
from tools.stats import Cell, Verdict, cell_of, compare, target_verdict

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = "pretrained_graphs"
TARGETS = {"sst_binary": 90.0, "sst": 50.0, "trec": 95.0}  # issue 24's targets (test accuracy, %)
TRAIN_SIZES = {"sst_binary": 6920, "sst": 8544, "trec": 4952, "sst2": 66477}  # training sentences (for the estimate)
EPOCHS = 2
NAMES = {"sst_binary": "binary SST", "sst": "SST-5", "trec": "TREC-6", "sst2": "GLUE SST-2 (dev as test)"}
SKIP = ("dataset.data_dir", "trainer.resume", "experiment", "trainer.progress")
TRANSFER = ("sst2", "sst_binary")  # a model trained on the first is also scored on the second's val and test
RULE_PAGE = "[docs/statistics.md](../statistics.md)"  # the page that states the rule, linked from docs/results/


def planned_cells(conf: Path) -> list[dict]:
    """Every (settings, seed) the experiment's grids name, in grid order."""
    grids = (yaml.safe_load(conf.read_text()) or {}).get("experiment_grids") or []
    cells = []
    for line in grids:
        keys, values = [], []
        for item in shlex.split(line):
            key, _, value = item.partition("=")
            if key not in SKIP:
                keys.append(key)
                values.append(value.split(","))
        for combo in itertools.product(*values):
            cells.append(dict(zip(keys, combo)))
    return cells


def run_of(run_dir: Path) -> dict | None:
    over = run_dir / ".hydra" / "overrides.yaml"
    if not over.is_file():
        return None
    settings = {}
    for item in yaml.safe_load(over.read_text()) or []:
        key, _, value = str(item).partition("=")
        if key not in SKIP:
            settings[key] = value
    out = {"dir": run_dir.name, "settings": settings, "finished": False}
    metrics = run_dir / "metrics.csv"
    if metrics.is_file():
        with open(metrics, newline="") as f:
            rows = list(csv.DictReader(f))
        out["epochs"] = [
            {"epoch": int(r["epoch"]), "val_acc": float(r["val_acc"]), "seconds": float(r["seconds"])} for r in rows
        ]
    results = run_dir / "results.json"
    if results.is_file():
        r = json.loads(results.read_text())
        out.update(
            finished=True,
            best_val_acc=r["best_val_acc"],
            best_epoch=r["best_epoch"],
            test_acc=r["test_acc"],
            epochs_run=r["epochs"],
            train_seconds=r["train_seconds"],
            n_test=r["num_examples"]["test"],
            n_train=r["num_examples"]["train"],
        )
        if r.get("test_predictions"):  # one bit per test sentence: comparisons on one test split are paired
            out["test_predictions"] = r["test_predictions"]
    for split in ("val", "test"):
        ev = run_dir / "eval" / f"{TRANSFER[1]}_{split}" / "eval.json"
        if ev.is_file():
            e = json.loads(ev.read_text())
            out.setdefault("transfer", {})[split] = {"acc": e["accuracy"], "n": sum(map(sum, e["confusion"]))}
    return out


def quoted(value) -> str:
    """A Hydra override value that may hold ``=`` or ``,`` (run directories do), quoted for its grammar."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def score_transfer(runs_dir: Path, data_dir: str) -> list[Path]:
    """Score each finished ``dataset=sst2`` run's best checkpoint on binary SST's val and test sentences
    (once: the results stay in the run's ``eval/``). Returns the eval.json files written."""
    written = []
    for run_dir in sorted(runs_dir.glob(f"dataset={TRANSFER[0]},*")):
        ckpt = run_dir / "checkpoints" / "best.pt"
        if not (run_dir / "results.json").is_file() or not ckpt.is_file():
            continue
        for split in ("val", "test"):
            out = run_dir / "eval" / f"{TRANSFER[1]}_{split}"
            if (out / "eval.json").is_file():
                continue
            cmd = [sys.executable, str(ROOT / "evaluate.py"), f"checkpoint={quoted(ckpt)}", f"dataset={TRANSFER[1]}"]
            cmd += [f"dataset.data_dir={quoted(data_dir)}", f"split={split}", f"hydra.run.dir={quoted(out)}"]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, cwd=ROOT, check=True)
            written.append(out / "eval.json")
    return written


def _canonical(value: str) -> str:
    """``2e-5`` and ``2e-05`` are one setting."""
    try:
        return repr(float(value))
    except ValueError:
        return value


def key_of(settings: dict) -> tuple:
    return tuple(sorted((k, _canonical(v)) for k, v in settings.items() if k != "seed"))


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def noise(p: float, n: int) -> float:
    return 200 * math.sqrt(max(p * (1 - p), 1e-12) / n)


def collect(runs_dir: Path, conf: Path) -> tuple[list[dict], dict[tuple, dict]]:
    """The finished or running runs under ``runs_dir``, and the cells (settings without the seed) of the
    experiment ``conf`` plans, each with its planned seeds and its runs."""
    runs = [r for d in sorted(runs_dir.glob("*")) if d.is_dir() and (r := run_of(d))] if runs_dir.is_dir() else []
    cells: dict[tuple, dict] = {}
    for plan in planned_cells(conf):
        cell = cells.setdefault(key_of(plan), {"settings": {k: v for k, v in plan.items() if k != "seed"}})
        cell.setdefault("seeds_planned", []).append(int(plan.get("seed", 0)))
    for run in runs:
        cell = cells.setdefault(key_of(run["settings"]), {"settings": dict(run["settings"]), "seeds_planned": []})
        cell.setdefault("runs", []).append(run)
    return runs, cells


def build(runs_dir: Path, conf: Path) -> dict:
    runs, cells = collect(runs_dir, conf)
    base_lr = _canonical(str((yaml.safe_load(conf.read_text()) or {}).get("optim", {}).get("lr", "")))
    return {"runs": runs, "cells": list(cells.values()), "base_lr": base_lr}


def stats(cell: dict) -> dict | None:
    """Mean and std (%) of a cell's finished runs' test accuracies, their count, the best validation accuracy
    (%) and the training seconds per example."""
    done = [r for r in cell.get("runs", []) if r["finished"]]
    if not done:
        return None
    tests = [100 * r["test_acc"] for r in done]
    m = mean(tests)
    sd = math.sqrt(sum((t - m) ** 2 for t in tests) / (len(tests) - 1)) if len(tests) > 1 else 0.0
    per_ex = sum(r["train_seconds"] for r in done) / sum(r["epochs_run"] * r["n_train"] for r in done)
    return {
        "mean": m,
        "sd": sd,
        "n": len(tests),
        "best_val": 100 * max(r["best_val_acc"] for r in done),
        "s_per_example": per_ex,
    }


def stats_cell(cell: dict) -> Cell:
    """A cell's finished runs as ``tools.stats`` reads them: their test accuracies, and their per-example
    predictions where every run kept them, else the test split's size (the unpaired rule)."""
    done = [r for r in cell.get("runs", []) if r["finished"]]
    return cell_of(done, n=done[0]["n_test"]) if done else Cell([])


def judge(a: dict, b: dict) -> Verdict:
    """Cell ``a`` against cell ``b`` (cells of this study's JSON): ``tools.stats.compare``, the one rule."""
    return compare(stats_cell(a), stats_cell(b))


def verdict_text(v: Verdict, a: str, b: str) -> str:
    """The verdict with the cells named: ``A higher`` -> ``{a} higher``, ``B higher`` -> ``{b} higher``."""
    return {"A higher": f"{a} higher", "B higher": f"{b} higher"}.get(v.verdict, v.verdict)


def judged_cells(v: Verdict) -> list[str]:
    """A verdict's difference and noise in points, as the tables print them ('–' where there is none)."""
    diff = f"{100 * v.diff:+.2f}" if v.diff is not None else "–"
    return [diff, f"{100 * v.noise:.2f}" if v.noise is not None else "–"]


def comparisons(data: dict) -> list[dict]:
    """Every graph against the complete graph of its dataset, as the table judges it (for the JSON)."""
    plain = plain_cells(data["cells"])
    by = {(c["settings"]["dataset"], c["settings"]["graph"]): c for c in plain}
    out = []
    for (d, g), c in by.items():
        ref = by.get((d, "complete"))
        if g == "complete" or ref is None or not any(r["finished"] for r in c.get("runs", [])):
            continue
        if not any(r["finished"] for r in ref.get("runs", [])):
            continue
        out.append({"dataset": d, "graph": g, "against": "complete", **judge(c, ref).as_dict()})
    return out


def cell_text(cell: dict) -> str:
    done = [r for r in cell.get("runs", []) if r["finished"]]
    going = [r for r in cell.get("runs", []) if not r["finished"] and r.get("epochs")]
    if not done:
        if going:
            e = going[0]["epochs"][-1]
            return f"unfinished (epoch {e['epoch']}: val {100 * e['val_acc']:.2f})"
        return "not run yet"
    st = stats(cell)
    sd = f" ± {st['sd']:.2f}" if st["n"] > 1 else ""
    return f"{st['mean']:.2f}{sd} ({st['n']} seed{'s' if st['n'] > 1 else ''}, val {st['best_val']:.2f})"


def runs_section(runs: list[dict]) -> list[str]:
    """The Runs table: every run's validation curve, chosen epoch, test accuracy with its noise, and wall time."""
    lines = [
        "",
        "## Runs",
        "",
        "| run | val per epoch | best epoch | best val | test | test noise (2 s.e.) | train wall time |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        per_epoch = ", ".join(f"{100 * e['val_acc']:.2f}" for e in r.get("epochs", []))
        if r["finished"]:
            p = r["test_acc"]
            lines.append(
                f"| {r['dir']} | {per_epoch} | {r['best_epoch']} | {100 * r['best_val_acc']:.2f} | {100 * p:.2f} "
                f"| ±{noise(p, r['n_test']):.2f} | {r['train_seconds'] / 60:.1f} min |"
            )
        else:
            spent = sum(e["seconds"] for e in r.get("epochs", []))
            lines.append(
                f"| {r['dir']} | {per_epoch} | – | – | unfinished (running, or stopped: resume=auto goes on) | – "
                f"| {spent / 60:.1f} min so far |"
            )
    return lines


def _grid_table(plain: list[dict], datasets: list[str], graphs: list[str], command: str) -> list[str]:
    """The title, the commands, the recipe and the dataset x graph table of test accuracies."""
    lines = [
        "# A pretrained Transformer on every graph: all-MiniLM-L6-v2 fine-tuned (issue 24)",
        "",
        "Produced by (the grid in `conf/experiment/pretrained_graphs.yaml`, in its order; runs go on with "
        "`trainer.resume=auto`), then the table:",
        "",
        "```",
        command,
        "python -m studies.pretrained_graphs",
        "```",
        "",
        "Recipe (the issue's scratch measurement): AdamW lr 3e-5, betas (0.9, 0.999), weight decay 0.01, batch 32, "
        "10% linear warmup then linear decay to 0, 2 epochs, gradient clipping 1.0, mean pooling and a linear head, "
        "dropout 0.1. Epoch chosen on validation: the test split is scored with the best validation epoch's "
        "checkpoint. The learning rate is 3e-5 everywhere; the grid {2e-5, 3e-5, 5e-5} on binary SST complete "
        "seed 0 checks that choice on validation ('Learning rate' below). Graphs: each word-level graph lifted to word pieces "
        "(docs/architecture.md, 'A pretrained family's data path').",
        "",
        "Test accuracy (%), mean ± std over the seeds that finished, and the best validation accuracy of those "
        "runs. 'not run yet': no run of that cell has finished (its cost: "
        "'Compute' below).",
        "",
        "| dataset | " + " | ".join(graphs) + " |",
        "|---|" + "---|" * len(graphs),
    ]
    by = {(c["settings"]["dataset"], c["settings"]["graph"]): c for c in plain}
    for d in datasets:
        row = [NAMES.get(d, d)]
        for g in graphs:
            c = by.get((d, g))
            if c is None:
                row.append("–")
            else:
                row.append(cell_text(c) + f" [{len(c.get('seeds_planned', []))} planned]")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _compute_section(cells: list[dict], runs: list[dict]) -> list[str]:
    """The measured training rate and the hours the runs not finished still need."""
    lines = ["", "## Compute", ""]
    done = [r for r in runs if r["finished"]]
    if done:
        rate = sum(r["train_seconds"] for r in done) / sum(r["epochs_run"] * r["n_train"] for r in done)  # s/example
        left = 0
        for c in cells:
            finished = sum(r["finished"] for r in c.get("runs", []))
            left += max(0, len(c.get("seeds_planned", [])) - finished) * EPOCHS * TRAIN_SIZES[c["settings"]["dataset"]]
        lines.append(
            f"Measured: {1 / rate:.1f} training examples per second over the finished runs (one thread each, "
            f"2 cores, the machine's load not recorded; validation and test scoring not included). The runs not finished "
            f"need about {left * rate / 3600:.1f} h more of training at that rate, one run at a time "
            "(`make experiment E=pretrained_graphs` goes on where it stopped)."
        )
    else:
        lines.append("No run has finished: no measured rate yet.")
    return lines


def _targets_section(plain: list[dict], transfer: list[dict]) -> list[str]:
    """Issue 24's targets: the cell chosen on validation per dataset, and whether it meets the target."""
    lines = ["", "## Targets (issue 24, test accuracy)", ""]
    lines.append(
        "Each cell (its settings, every seed that finished) is scored by its mean validation accuracy; the best "
        "cell on validation is chosen and its mean test accuracy is the number. Met or missed is judged by "
        f"`tools.stats.against` ({RULE_PAGE}: the seeds' variance over their number plus the test split's "
        "binomial term, not divided by the seeds; Student's t, two-sided 5%): within the noise, the target is met "
        "or missed on this test split, not beyond doubt; one seed is not judged."
    )
    lines.append("")
    for d, target in TARGETS.items():
        # (mean validation, mean test, cell, seeds, noise) of every cell scored on d: its own, and a transfer onto d
        done = []
        for c in plain:
            runs = [r for r in c.get("runs", []) if r["finished"]] if c["settings"]["dataset"] == d else []
            if runs:
                vals, tests = [r["best_val_acc"] for r in runs], [r["test_acc"] for r in runs]
                name = " ".join(f"{k}={v}" for k, v in c["settings"].items())
                done.append((mean(vals), mean(tests), name, len(runs), runs[0]["n_test"], tests))
        if d == TRANSFER[1]:
            for c in transfer:
                for r in c.get("runs", []):
                    if {"val", "test"} <= set(r.get("transfer", {})):
                        t = r["transfer"]
                        name = f"{r['dir']}, scored on {NAMES[d]}"
                        done.append((t["val"]["acc"], t["test"]["acc"], name, 1, t["test"]["n"], [t["test"]["acc"]]))
        if not done:
            lines.append(f"- {NAMES[d]} ≥ {target:.0f}: not run yet.")
            continue
        val, test, name, seeds, n, tests = max(done)  # the cell chosen on validation
        acc = 100 * test
        verdict = target_verdict([100 * t for t in tests], target, n)
        lines.append(
            f"- {NAMES[d]} ≥ {target:.0f}: {acc:.2f} ({name}, {seeds} seed{'s' if seeds > 1 else ''}; the best "
            f"of {len(done)} cells on validation, {100 * val:.2f}): {verdict}."
        )
    lines.append("")
    return lines


def plain_cells(cells: list[dict]) -> list[dict]:
    """The dataset x graph cells (no other setting), the phrase-trained transfer runs left out."""
    return [c for c in cells if set(c["settings"]) <= {"dataset", "graph"} and c["settings"]["dataset"] != TRANSFER[0]]


def markdown(data: dict, command: str) -> str:
    cells = data["cells"]
    plain = plain_cells(cells)
    datasets = list(dict.fromkeys(c["settings"]["dataset"] for c in plain))
    graphs = list(dict.fromkeys(c["settings"]["graph"] for c in plain))
    lines = _grid_table(plain, datasets, graphs, command)
    transfer = [c for c in cells if c["settings"].get("dataset") == TRANSFER[0]]
    others = [c for c in cells if c not in plain and c not in transfer]
    lines += against_complete_section(plain, datasets, graphs)
    lines += transfer_section(transfer)
    if others:
        lines += ["", "Other cells:", ""]
        for c in others:
            lines.append(f"- {' '.join(f'{k}={v}' for k, v in sorted(c['settings'].items()))}: {cell_text(c)}")
    lines += learning_rate_section(plain, others, data["base_lr"])
    lines += runs_section(data["runs"])
    lines += _compute_section(cells, data["runs"])
    lines += _targets_section(plain, transfer)
    return "\n".join(lines)


def learning_rate_section(plain: list[dict], others: list[dict], base_lr: str) -> list[str]:
    """The lr grid (binary SST, complete, seed 0) on validation beside the recipe's own seed-0 run (``base_lr``,
    the experiment's ``optim.lr``)."""
    where = {"dataset": "sst_binary", "graph": "complete"}
    scored = {}
    for c in [*plain, *others]:
        settings = dict(c["settings"])
        lr = _canonical(settings.pop("optim.lr", base_lr))
        for r in c.get("runs", []) if settings == where else []:
            if r["finished"] and r["settings"].get("seed", "0") == "0":
                scored[lr] = r
    if len(scored) < 2:
        return []
    order = sorted(scored, key=float)
    best = max(order, key=lambda lr: scored[lr]["best_val_acc"])
    listing = ", ".join(
        f"{lr}: val {100 * scored[lr]['best_val_acc']:.2f} (test {100 * scored[lr]['test_acc']:.2f})" for lr in order
    )
    verdict = (  # one seed per lr: the highest number, not a judged difference
        f"the recipe's {base_lr} scores highest on validation (one seed, not judged) and stays"
        if best == base_lr
        else f"{best} scores higher on validation than the recipe's {base_lr} (one seed, not judged); the grid above "
        f"was run at {base_lr}"
    )
    return ["", "## Learning rate", "", f"Binary SST, complete graph, seed 0 — {listing}: {verdict}."]


def against_complete_section(plain: list[dict], datasets: list[str], graphs: list[str]) -> list[str]:
    """Each sparse graph against the complete graph of its dataset: the difference, its noise, the verdict of
    ``tools.stats.compare`` and its rule, the cost."""
    cells = {(c["settings"]["dataset"], c["settings"]["graph"]): c for c in plain}
    by = {key: stats(c) for key, c in cells.items()}
    lines = [
        "",
        "## Each graph against the complete graph",
        "",
        "Difference in mean test accuracy (points) to the complete graph of the same dataset, the noise it must "
        f"clear to be a finding and the verdict, by the one rule of {RULE_PAGE} (`tools.stats.compare`: each "
        "cell's seed variance over its seeds plus the test set's term, Student's t on Welch-Satterthwaite degrees "
        "of freedom, two-sided 5%; a cell of one seed borrows the other cell's seed spread, two cells of one seed "
        "each are not judged). `rule`: `paired` where both cells' runs kept their per-example test predictions, "
        "else `unpaired` (each cell's binomial test error, not divided by its seeds). Cost: training seconds per "
        "example against the "
        "complete graph's, from the runs' wall times on 2 cores under loads not recorded (one config's seeds "
        "differ by more than 2× in the Runs table, so these ratios can be off by 2× or more; "
        "the ratios measured side by side on one batch are in [bench/results/cpu-2core/pretrained.md]"
        "(../../bench/results/cpu-2core/pretrained.md), `make bench`).",
        "",
        "| dataset | graph | seeds (graph / complete) | difference | noise | verdict | rule | training time vs complete |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in datasets:
        c = by.get((d, "complete"))
        if c is None:
            continue
        for g in graphs:
            a = by.get((d, g))
            if g == "complete" or a is None:
                continue
            v = judge(cells[(d, g)], cells[(d, "complete")])
            lines.append(
                f"| {NAMES.get(d, d)} | {g} | {a['n']} / {c['n']} | {' | '.join(judged_cells(v))} "
                f"| {verdict_text(v, 'graph', 'complete')} | {v.rule or '–'} | {a['s_per_example'] / c['s_per_example']:.2f}× |"
            )
    return lines


def transfer_section(transfer: list[dict]) -> list[str]:
    """The runs fine-tuned on GLUE SST-2's phrases, on GLUE's dev set and on binary SST's sentences."""
    runs = [r for c in transfer for r in c.get("runs", [])]
    if not transfer:
        return []
    lines = [
        "",
        f"## Trained on GLUE SST-2's phrases, scored on {NAMES[TRANSFER[1]]}",
        "",
        "GLUE SST-2's 67,349 training phrases all come from the treebank's training split, so binary SST's val "
        "and test sentences stay held out. Its own validation split is 872 phrases carved from its training "
        "phrases (seeded); its test split is GLUE's dev set. Scored on binary SST by `python evaluate.py "
        "checkpoint=<run>/checkpoints/best.pt dataset=sst_binary dataset.data_dir=../shared/data/sst "
        "split=val|test` (run by this tool; kept in the run's `eval/`).",
        "",
        "| run | val (GLUE phrases) | GLUE SST-2 dev | binary SST val | binary SST test | test noise (2 s.e.) "
        "| train wall time |",
        "|---|---|---|---|---|---|---|",
    ]
    if not runs:
        lines.append("| (not run yet) | – | – | – | – | – | – |")
    for r in runs:
        if not r["finished"]:
            lines.append(f"| {r['dir']} | unfinished | – | – | – | – | – |")
            continue
        t = r.get("transfer", {})
        val = f"{100 * t['val']['acc']:.2f}" if "val" in t else "not scored yet"
        test = f"{100 * t['test']['acc']:.2f}" if "test" in t else "not scored yet"
        se = f"±{noise(t['test']['acc'], t['test']['n']):.2f}" if "test" in t else "–"
        lines.append(
            f"| {r['dir']} | {100 * r['best_val_acc']:.2f} | {100 * r['test_acc']:.2f} | {val} | {test} | {se} "
            f"| {r['train_seconds'] / 60:.1f} min |"
        )
    return lines


def plot(data: dict, path: Path) -> Path:
    from tools.common import pyplot

    plt = pyplot()
    plain = [c for c in data["cells"] if set(c["settings"]) <= {"dataset", "graph"}]
    plain = [c for c in plain if c["settings"]["dataset"] != TRANSFER[0]]
    done = [
        (c["settings"]["dataset"], c["settings"]["graph"], [100 * r["test_acc"] for r in c["runs"] if r["finished"]])
        for c in plain
        if any(r["finished"] for r in c.get("runs", []))
    ]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    if done:
        labels = [f"{NAMES.get(d, d)}\n{g}" for d, g, _ in done]
        means = [sum(t) / len(t) for _, _, t in done]
        ax.bar(range(len(done)), means, color="tab:blue")
        for i, (_, _, tests) in enumerate(done):
            ax.scatter([i] * len(tests), tests, color="black", s=10, zorder=3)
        ax.set_xticks(range(len(done)), labels, fontsize=8)
        ax.set_ylim(min(means) - 10, 100)
    else:
        ax.text(0.5, 0.5, "no run finished yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("fine-tuned all-MiniLM-L6-v2 by graph (finished runs; dots: seeds)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def replay_table(pg: dict) -> str:
    """``docs/results/pretrained_graphs.md`` from its JSON alone (``tools.check_docs`` replays it): the table
    and its figure's link."""
    figure = f"\n![test accuracy by graph](../figures/{EXPERIMENT}.png)\n"
    return markdown(pg, f"make experiment E={EXPERIMENT}") + figure


def comparisons_are_current(root: Path) -> list[str]:
    """``tools.check_docs``: the committed JSON's ``comparisons`` are what ``comparisons`` gives today from its cells."""
    return judged_as_committed(
        root,
        f"docs/results/{EXPERIMENT}.json",
        lambda _root, data: comparisons(data),
        f"python -m studies.{EXPERIMENT} --table-only",
    )


CHECKS = [comparisons_are_current]  # tools.check_docs runs these beside the table below (one line per problem)

# the table tools.check_docs replays
REPLAYS = [
    Table(
        "docs/results/pretrained_graphs.md",
        ("docs/results/pretrained_graphs.json",),
        replay_table,
        "studies.pretrained_graphs.markdown",
    )
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "multirun" / EXPERIMENT)
    parser.add_argument("--conf", type=Path, default=ROOT / "conf" / "experiment" / f"{EXPERIMENT}.yaml")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    parser.add_argument("--figures", type=Path, default=ROOT / "docs" / "figures")
    parser.add_argument("--command", default=f"make experiment E={EXPERIMENT}")
    parser.add_argument("--sst-dir", default="../shared/data/sst", help="binary SST's folder, for the transfer rows")
    parser.add_argument("--no-transfer", action="store_true", help="do not score sst2 runs on binary SST")
    parser.add_argument(
        "--table-only",
        action="store_true",
        help="no run directories: the table and the verdicts again from the committed <out>/pretrained_graphs.json",
    )
    args = parser.parse_args(argv)
    from engine.io import keep_study_runs, write_json

    if args.table_only:
        data = json.loads((args.out / f"{EXPERIMENT}.json").read_text())
        data.pop("comparisons", None)
    else:  # a checkout without the run directories: no table of fewer runs over the committed one
        keep_study_runs(args.out, args.runs, EXPERIMENT)
        if not args.no_transfer and args.runs.is_dir():
            score_transfer(args.runs, args.sst_dir)
        data = build(args.runs, args.conf)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"{EXPERIMENT}.json", {**data, "comparisons": comparisons(data)})
    (args.out / f"{EXPERIMENT}.md").write_text(
        markdown(data, args.command) + f"\n![test accuracy by graph](../figures/{EXPERIMENT}.png)\n"
    )
    if args.table_only:  # the figure is drawn from the same numbers: it stays as it is
        print(f"saved {args.out / f'{EXPERIMENT}.md'} and {EXPERIMENT}.json")
        return 0
    print(f"saved {args.out / f'{EXPERIMENT}.md'}, {plot(data, args.figures / f'{EXPERIMENT}.png')}")
    return 0
