"""Accuracy, overall and broken down by tree depth, sentence length and root operator."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from data.device_batches import DenseBatch
from engine.compiled import device_logits
from engine.loop import autocast
from engine.predictions import decode_correct, encode_correct  # noqa: F401  (re-exported)

LENGTH_BUCKETS = (10, 20, 40, 60, 100, 200, 500, 1000, 2000)


@torch.no_grad()
def predict(
    model, loader, device, graph_device=None, precision: str = "fp32"
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Predictions and labels for a whole loader (in its order), and the mean loss. Graphs go to
    ``graph_device`` (default ``device``): the CPU when DGL cannot follow the model to a GPU; a batch made on the
    device (``trainer.device_batches``: ``data.device_batches.DenseBatch``) goes to ``engine.compiled.device_logits``,
    the model's dense forward on it. Predictions and the loss stay on the device until the end (one read);
    ``precision=bf16``: under autocast."""
    model.eval()
    preds, labels = [], []
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)  # float64: as the Python float it replaces
    for g, y in loader:
        labels.append(y)
        made = isinstance(g, DenseBatch)  # made on the device (trainer.device_batches): there already
        g, y = g if made else g.to(graph_device or device), y.to(device, non_blocking=True)
        with autocast(device, precision):
            logits = device_logits(model, g) if made else model(g)
            loss_sum += F.cross_entropy(logits.float(), y, reduction="sum").double()
        preds.append(logits.argmax(-1))
    preds, labels = torch.cat(preds).cpu(), torch.cat(labels).cpu()
    return preds, labels, loss_sum.item() / max(1, len(labels))


def length_bucket(n: int) -> str:
    lo = 1
    for hi in LENGTH_BUCKETS:
        if n <= hi:
            return f"{lo}-{hi}"
        lo = hi + 1
    return f">{LENGTH_BUCKETS[-1]}"


def breakdown(correct: np.ndarray, keys: list) -> dict[str, dict]:
    """``{key: {"n": count, "acc": accuracy}}`` in sorted key order."""
    groups = defaultdict(list)
    for ok, k in zip(correct, keys):
        groups[k].append(ok)

    def order(k):  # depths as numbers, length buckets by their lower end, operators by name
        if isinstance(k, (int, np.integer)):
            return (0, int(k), "")
        head = str(k).lstrip(">").split("-")[0]
        return (1, int(head) + (str(k).startswith(">")), "") if head.isdigit() else (2, 0, str(k))

    keys_sorted = sorted(groups, key=order)
    return {str(k): {"n": len(groups[k]), "acc": float(np.mean(groups[k]))} for k in keys_sorted}


def summarize(preds: torch.Tensor, labels: torch.Tensor, meta: dict, num_classes: int) -> dict:
    correct = (preds == labels).numpy()
    out = {"accuracy": float(correct.mean()), "num_examples": int(len(labels))}
    if "depth" in meta:
        out["by_depth"] = breakdown(correct, list(meta["depth"]))
    if "length" in meta:
        out["by_length"] = breakdown(correct, [length_bucket(n) for n in meta["length"]])
    if "group" in meta:
        out["by_root"] = breakdown(correct, list(meta["group"]))
    cm = np.zeros((num_classes, num_classes), dtype=int)
    np.add.at(cm, (labels.numpy(), preds.numpy()), 1)
    out["confusion"] = cm.tolist()  # rows: true label, columns: predicted
    return out


def format_table(summary: dict) -> str:
    lines = [f"accuracy {summary['accuracy']:.4f} on {summary['num_examples']} examples"]
    for name, title in (("by_depth", "tree depth"), ("by_length", "length"), ("by_root", "root operator")):
        if name in summary:
            lines.append(f"\n  {title:<14} {'n':>6} {'acc':>7}")
            lines += [f"  {k:<14} {v['n']:>6} {v['acc']:>7.4f}" for k, v in summary[name].items()]
    return "\n".join(lines)


def plot_confusion(confusion, path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cm = np.asarray(confusion)
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    im = ax.imshow(cm, cmap="Blues")
    ax.set(
        xlabel="predicted",
        ylabel="true",
        title=title or "confusion matrix",
        xticks=range(cm.shape[1]),
        yticks=range(cm.shape[0]),
    )
    for i in range(cm.shape[0]):
        for j in range(cm.shape[1]):
            if cm[i, j]:
                ax.text(
                    j,
                    i,
                    cm[i, j],
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if cm[i, j] > cm.max() / 2 else "black",
                )
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
