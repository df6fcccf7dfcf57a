"""What walking the tree costs: a recursive model's training step against a tree Transformer's.

    python -m bench.recursive            # make bench; about 2 min on 2 CPU cores
    python -m bench.recursive --quick    # a smoke run in seconds

On the same batches of published-scale ListOps expressions (128 per batch, the published
recipe, lengths <= 100), it times one training step (forward, backward, AdamW) of:

  transformer/tree         the default 4-layer synchronous Transformer on the gold tree
  treelstm childsum/tree   the Child-Sum Tree-LSTM, level-batched (models/recursive.py)
  treelstm binary/binary_tree   the binary Tree-LSTM on the binarised tree (~2x the nodes, ~2x the levels)
  recursive deepsets/tree  the recursive Deep Sets model
  ... and the same Tree-LSTMs by ``dgl.prop_nodes_topo`` (the DGL-idiom reference)

and prints each step's time relative to the Transformer's. The target: a Tree-LSTM step at most
3x a tree-Transformer step. Writes ``recursive.csv`` and ``recursive.md`` to ``--out`` (default
bench/results/<machine>/, e.g. ``cpu-2core``: it runs on the CPU).
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import dgl
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import RESULTS, machine_slug  # noqa: E402
from data import listops  # noqa: E402
from data.graphs import GraphConstruction  # noqa: E402
from data.vocab import Vocab  # noqa: E402
from engine.io import write_csv  # noqa: E402
from models.encoder import GraphEncoder  # noqa: E402
from models.recursive import RecursiveEncoder  # noqa: E402
from models.registry import yaml_config  # noqa: E402


def tree_model(cell: str, vocab_size: int) -> RecursiveEncoder:
    """conf/model/treelstm.yaml's model (d = 128, dropout 0.1, the root's h) with ``cell``."""
    return RecursiveEncoder(yaml_config("treelstm", cell=cell), vocab_size, 10)


# (label, graph, builder, use the DGL reference path)
CASES = (
    ("transformer/tree (4 layers)", "tree", lambda v: GraphEncoder(yaml_config("transformer", readout="root", impl="sparse"), v, 10), False),
    ("treelstm childsum/tree", "tree", lambda v: tree_model("childsum", v), False),
    ("treelstm binary/binary_tree", "binary_tree", lambda v: tree_model("binary", v), False),
    ("recursive deepsets/tree", "tree", lambda v: tree_model("deepsets", v), False),
    ("treelstm childsum/tree, DGL prop_nodes_topo", "tree", lambda v: tree_model("childsum", v), True),
    ("treelstm binary/binary_tree, DGL prop_nodes_topo", "binary_tree",
     lambda v: tree_model("binary", v), True),
)  # fmt: skip


def batches(num_batches: int, batch_size: int, seed: int = 0):
    """Published-recipe examples, cut into batches, and the vocabulary."""
    examples = list(listops.generate(num_batches * batch_size, seed=seed))
    random.Random(seed).shuffle(examples)  # i.i.d. lengths, as the training splits are
    vocab = Vocab.build([e["tokens"] for e in examples])
    return [examples[i : i + batch_size] for i in range(0, len(examples), batch_size)], vocab


def time_steps(model, graphs, labels, reference: bool, repeats: int) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward = model.forward_reference if reference else model.forward
    times = []
    for _ in range(repeats):
        for g, y in zip(graphs, labels):
            t0 = time.perf_counter()
            loss = F.cross_entropy(forward(g), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
    return times


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 small batches, no DGL-idiom reference paths")
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3, help="passes over the batches; the first is warm-up")
    p.add_argument(
        "--out",
        default=str(RESULTS / machine_slug(torch.device("cpu"))),
        help="default: bench/results/cpu-<cores>core/",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.batches, args.batch_size, args.repeats = 2, 16, 2
    torch.manual_seed(0)
    data, vocab = batches(args.batches, args.batch_size)
    labels = [torch.tensor([e["label"] for e in b]) for b in data]
    rows = []
    for label, graph, build, reference in CASES:
        if args.quick and reference:  # the DGL-idiom paths are slow; --quick checks the script, it does not measure
            continue
        con = GraphConstruction(graph, phrase_id=vocab.phrase_id)
        graphs = [dgl.batch([con(vocab.encode(e["tokens"]), e["heads"]) for e in b]) for b in data]
        model = build(len(vocab))
        times = time_steps(model, graphs, labels, reference, args.repeats)[len(graphs) :]  # drop the warm-up pass
        nodes = statistics.mean(g.num_nodes() for g in graphs)
        levels = statistics.mean(int(g.ndata["height"].max()) + 1 for g in graphs)
        rows.append({"model": label, "ms_per_step": 1000 * statistics.median(times), "nodes": nodes, "levels": levels})
        print(f"{label:52s} {rows[-1]['ms_per_step']:8.1f} ms/step  {nodes:6.0f} nodes  {levels:5.1f} levels")
    base = rows[0]["ms_per_step"]
    for r in rows:
        r["vs_transformer"] = r["ms_per_step"] / base
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "recursive.csv", rows)
    lines = [
        "# Recursive models: one training step against the tree Transformer's",
        "",
        f"`python -m bench.recursive{' --quick' if args.quick else ''}` on {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}, dgl {dgl.__version__}; "
        f"{args.batches} batches of {args.batch_size} published-recipe ListOps expressions, median step "
        f"(forward + backward + AdamW) over passes 2-{args.repeats} (the first warms up).",
        "",
        "| model | ms / step | x transformer step | nodes / batch | levels / batch |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['model']} | {r['ms_per_step']:.1f} | {r['vs_transformer']:.2f} | {r['nodes']:.0f} | {r['levels']:.1f} |"
        for r in rows
    ]
    (out / "recursive.md").write_text("\n".join(lines) + "\n")
    print(f"-> {out / 'recursive.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
