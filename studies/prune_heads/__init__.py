"""Are all those heads needed? Silence the heads of a trained model one at a time and watch accuracy
("Are Sixteen Heads Really Better than One?", Michel et al., 2019).

A masked head's output is zeroed before the output projection O; there is no retraining.
The order heads go in:
  importance (default)  mask each head alone once, score it by the validation accuracy lost, and
                        prune the least important first: layers·heads validation runs to rank, then
                        one validation and one test run per step. Michel et al. score heads by a
                        gradient proxy of the same loss change.
  greedy                at each step try every remaining head and drop the one whose loss hurts
                        validation accuracy least: about (layers·heads)²/2 runs, slower, stronger.

    python -m studies.prune_heads multirun/heads/3_heads8                   # a run dir or a .pt file
    python -m studies.prune_heads RUN --method greedy --val-examples 500 --out DIR

Writes ``prune.json`` and ``prune.png`` (accuracy against heads kept) to ``RUN/prune`` or ``--out``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from tqdm.auto import tqdm

from engine.io import write_json
from tools.common import Run, accuracy, output_dir, pyplot, run_parser


def attention_modules(model) -> list:
    """The distinct attention aggregators (a shared block counts once: masking it masks every layer)."""
    mods = [b.aggregator for b in model.blocks if getattr(b.aggregator, "num_heads", 0) > 0]
    if not mods or not hasattr(mods[0], "head_mask"):
        raise ValueError("this model has no attention heads to prune: use model=gat or model=transformer")
    return mods


def set_mask(mods: list, pruned: set[tuple[int, int]]) -> None:
    for i, m in enumerate(mods):
        mask = torch.ones(m.num_heads)
        for layer, head in pruned:
            if layer == i:
                mask[head] = 0.0
        m.head_mask = None if mask.all() else mask


def prune(run: Run, val_examples: int | None = None, method: str = "importance", progress: bool = True) -> dict:
    if method not in ("importance", "greedy"):
        raise ValueError(f"unknown pruning method {method!r}; valid: importance, greedy")
    model = run.model
    mods = attention_modules(model)
    val = run.batches(run.split("val", val_examples))
    test = run.batches(run.split("test"))
    heads = [(i, h) for i, m in enumerate(mods) for h in range(m.num_heads)]
    total = len(heads) * (len(heads) + 1) // 2 - 1 if method == "greedy" else len(heads)
    bar = tqdm(total=total, disable=not progress)

    def val_without(removed: set) -> float:
        set_mask(mods, removed)
        bar.update()
        return accuracy(model, val)

    try:
        pruned: set[tuple[int, int]] = set()
        set_mask(mods, pruned)
        steps = [
            {
                "heads_kept": len(heads),
                "removed": None,
                "val_acc": accuracy(model, val),
                "test_acc": accuracy(model, test),
            }
        ]
        importance = {}
        if method == "importance":  # accuracy lost when a head alone is masked; ties: earlier heads first
            importance = {h: steps[0]["val_acc"] - val_without({h}) for h in heads}
            order = sorted(heads, key=lambda h: (importance[h], h))
        while len(pruned) < len(heads) - 1:  # keep one head: with none, attention is gone altogether
            if method == "greedy":
                remaining = [h for h in heads if h not in pruned]
                chosen = max(remaining, key=lambda h: (val_without(pruned | {h}), [-x for x in h]))
            else:
                chosen = order[len(pruned)]
            pruned.add(chosen)
            set_mask(mods, pruned)
            steps.append(
                {
                    "heads_kept": len(heads) - len(pruned),
                    "removed": {"layer": chosen[0] + 1, "head": chosen[1] + 1},
                    "val_acc": accuracy(model, val),
                    "test_acc": accuracy(model, test),
                }
            )
    finally:  # the model leaves with every head on, whatever happened
        bar.close()
        set_mask(mods, set())
    return {
        "checkpoint": str(run.path),
        "model": run.config["model"]["name"],
        "graph": run.config["graph"]["name"],
        "method": method,
        "layers": len(mods),
        "heads_per_layer": mods[0].num_heads,
        "val_examples": sum(len(y) for _, y in val),
        "test_examples": sum(len(y) for _, y in test),
        "importance": [{"layer": h[0] + 1, "head": h[1] + 1, "val_acc_lost": v} for h, v in importance.items()],
        "steps": steps,
        "choices": choices(steps),
    }


def format_report(r: dict) -> str:
    full = r["steps"][0]
    lines = [
        f"{r['model']} on {r['graph']} graphs, {r['layers']} layers x {r['heads_per_layer']} heads "
        f"({r['method']} order on {r['val_examples']} val examples)",
        "",
        "| heads kept | removed (layer, head) | val acc | test acc |",
        "|---|---|---|---|",
    ]
    for s in r["steps"]:
        removed = f"{s['removed']['layer']}, {s['removed']['head']}" if s["removed"] else "–"
        lines.append(f"| {s['heads_kept']} | {removed} | {s['val_acc']:.3f} | {s['test_acc']:.3f} |")
    lines.append("")
    for c in r.get("choices") or choices(r["steps"]):
        lines.append(
            f"fewest heads whose validation accuracy is within {c['points']} point(s) of all heads': "
            f"{c['heads_kept']} of {full['heads_kept']}; test accuracy there {c['test_acc']:.3f} "
            f"(all heads {full['test_acc']:.3f}, {100 * (c['test_acc'] - full['test_acc']):+.1f} points)"
        )
    return "\n".join(lines)


def choices(steps: list[dict], points=(1, 5)) -> list[dict]:
    """How many heads to keep, chosen on validation only: the fewest heads kept before validation
    accuracy first falls more than ``points`` below the full model's; the test accuracy is reported
    at that choice, never used to make it."""
    full, out = steps[0], []
    for p in points:
        drop = next((i for i, s in enumerate(steps) if s["val_acc"] < full["val_acc"] - p / 100), len(steps))
        chosen = steps[drop - 1]
        out.append(
            {
                "points": p,
                "heads_kept": chosen["heads_kept"],
                "val_acc": chosen["val_acc"],
                "test_acc": chosen["test_acc"],
            }
        )
    return out


def plot(r: dict, path: Path) -> Path:
    plt = pyplot()

    kept = [s["heads_kept"] for s in r["steps"]]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(kept, [s["val_acc"] for s in r["steps"]], marker="o", label="validation (chooses)")
    ax.plot(kept, [s["test_acc"] for s in r["steps"]], marker="s", label="test")
    ax.invert_xaxis()
    ax.set(
        xlabel="heads kept",
        ylabel="accuracy",
        title=f"pruning {r['layers']}x{r['heads_per_layer']} heads, no retraining",
    )
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    parser = run_parser(__doc__, "prune")
    parser.add_argument("--val-examples", type=int, default=None, help="validation examples the search uses (all)")
    parser.add_argument("--method", default="importance", help="importance (default) | greedy")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        run = Run.load(args.run)
        result = prune(run, args.val_examples, args.method, progress=not args.no_progress)
        out = output_dir(args, run, "prune")
        write_json(out / "prune.json", result)
        print(format_report(result))
        print(f"saved {plot(result, out / 'prune.png')}")
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
