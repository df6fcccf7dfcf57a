"""What the analysis tools share: a trained run, its model and one split's batches."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import datasets
import torch

from data.batches import make_loader
from data.graph_dataset import GraphDataset
from data.splits import load_splits
from engine.checkpoint import load_checkpoint, load_model


def find_checkpoint(path: str | Path) -> Path:
    """A checkpoint file, or a run directory holding ``checkpoints/best.pt``."""
    path = Path(path)
    if path.is_dir():
        best = path / "checkpoints" / "best.pt"
        if not best.is_file():
            raise FileNotFoundError(f"no checkpoints/best.pt in {path}: pass a run directory train.py wrote")
        return best
    return path


@dataclass
class Run:
    """A trained model with the data it was trained on, rebuilt from its checkpoint."""

    path: Path
    model: torch.nn.Module
    config: dict
    vocab: object
    construction: object
    num_classes: int

    @classmethod
    def load(cls, path: str | Path) -> Run:
        ckpt_path = find_checkpoint(path)
        ckpt = load_checkpoint(ckpt_path)
        model, vocab, construction, config = load_model(ckpt, str(ckpt_path))
        model.eval()
        return cls(ckpt_path, model, config, vocab, construction, int(ckpt["num_classes"]))

    def split(self, name: str, max_examples: int | None = None) -> datasets.Dataset:
        if name not in ("train", "val", "test"):
            raise ValueError(f"unknown split {name!r}; valid: train, val, test")
        ds = load_splits(self.config["dataset"], progress=False)[name]
        return ds.select(range(min(len(ds), max_examples))) if max_examples else ds

    def batches(self, ds: datasets.Dataset, batch_size: int = 256) -> list:
        """``[(batched graph, labels), ...]`` in dataset order, built once (tools evaluate many times)."""
        data = GraphDataset(ds, self.vocab, self.construction, desc="analysis", progress=False)
        return list(make_loader(data, batch_size, shuffle=False))


@torch.no_grad()
def accuracy(model: torch.nn.Module, batches: list) -> float:
    model.eval()
    correct = total = 0
    for g, y in batches:
        correct += (model(g).argmax(-1) == y).sum().item()
        total += len(y)
    return correct / max(1, total)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (the tools run without a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def run_parser(doc: str, default_out: str) -> argparse.ArgumentParser:
    """The command line every analysis tool starts from: a run, and where to write."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("run", help="a run directory (with checkpoints/best.pt) or a checkpoint file")
    parser.add_argument("--out", type=Path, help=f"where to write (default RUN/{default_out})")
    return parser


def output_dir(args: argparse.Namespace, run: Run, default_out: str) -> Path:
    """``--out``, else ``<run dir>/<default_out>``; created."""
    run_dir = Path(args.run) if Path(args.run).is_dir() else run.path.parent.parent
    out = args.out or run_dir / default_out
    out.mkdir(parents=True, exist_ok=True)
    return out
