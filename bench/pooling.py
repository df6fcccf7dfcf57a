"""The attention-free reductions on the complete graph: what a dense step of sum, mean and max costs.

    python -m bench.pooling                  # batches of 128 ListOps-length graphs, d = 64: ~1 min on 2 cores
    python -m bench.pooling --batches 2 --threads 1

On a complete graph with self loops every node receives from every node, so max_j h_j is one maximum
per graph that all its rows share (``PoolAggregation.max_complete``, O(B n d)). The general dense max
(``reduce_dense``) builds a (B, n, n, d) tensor for the same numbers. Sum and mean are one batched
product with the (B, n, n) adjacency. Timed here: forward and backward of one aggregation (the
linear W included), on the same padded batches, side by side; the max's two paths are checked to
agree before they are timed. Writes ``pooling.md`` to ``--out`` (default bench/results/<machine>/).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from bench.machine import invocation, machine_slug, results_dir
from data import listops
from models.aggregators import PoolAggregation
from models.dense import DenseGraph


def batches(num: int, size: int, seed: int = 0) -> list[torch.Tensor]:
    """Graph sizes of ``num`` batches of ``size`` ListOps expressions (the generator's length distribution)."""
    lengths = [len(ex["tokens"]) for ex in listops.generate(num * size, seed=seed)]
    return [torch.tensor(lengths[k * size : (k + 1) * size]) for k in range(num)]


def paths(dim: int) -> dict:
    """name -> function of (h, DenseGraph): the dense aggregation as the model runs it, and the
    general (B, n, n, d) max it replaces on complete graphs."""
    torch.manual_seed(0)
    mods = {r: PoolAggregation(dim, reduce=r) for r in ("sum", "mean", "max")}
    return {
        "sum": lambda h, dg: mods["sum"].forward_dense(h, dg),
        "mean": lambda h, dg: mods["mean"].forward_dense(h, dg),
        "max, one per graph": lambda h, dg: mods["max"].forward_dense(h, dg),
        "max, (B, n, n, d)": lambda h, dg: mods["max"].linear(mods["max"].reduce_dense(h, dg.adjacency())),
    }


def step_ms(fn, h: torch.Tensor, dg: DenseGraph, repeats: int) -> float:
    """The median wall time of forward + backward, in ms."""
    times = []
    for _ in range(repeats + 1):  # the first is a warm-up
        x = h.detach().requires_grad_()
        start = time.perf_counter()
        fn(x, dg).sum().backward()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[1:])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--machine", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    fns = paths(args.dim)
    totals = {name: 0.0 for name in fns}
    start, shapes = time.perf_counter(), []
    for k, sizes in enumerate(batches(args.batches, args.batch_size)):
        n = int(sizes.max())
        dg = DenseGraph(torch.arange(n)[None, :] < sizes[:, None], None, None)  # complete, self loops
        h = torch.randn(len(sizes), n, args.dim, generator=torch.Generator().manual_seed(k))
        want = fns["max, (B, n, n, d)"](h, dg)
        got = fns["max, one per graph"](h, dg)
        if not torch.allclose(got, want, atol=1e-5):
            raise SystemExit("error: the two max paths disagree; tests/models/test_pooling_and_heads.py says where")
        for name, fn in fns.items():
            totals[name] += step_ms(fn, h, dg, args.repeats)
        shapes.append(n)
        print(f"batch {k + 1}: n_max {n}, " + ", ".join(f"{m} {totals[m]:.0f} ms" for m in fns), flush=True)
    per = {name: t / len(shapes) for name, t in totals.items()}
    device = torch.device("cpu")
    lines = [
        "# Sum, mean and max on the complete graph: one dense aggregation step",
        "",
        f"`{invocation('pooling', argv).strip()}` on {machine_slug(device)} ({torch.get_num_threads()} torch threads, "
        f"load average {os.getloadavg()[0]:.1f} at the end): {time.perf_counter() - start:.0f} s. "
        f"{len(shapes)} batches of {args.batch_size} ListOps-length graphs (n_max {min(shapes)}–{max(shapes)}), "
        f"d = {args.dim}; forward + backward of `PoolAggregation.forward_dense` (median of {args.repeats}).",
        "",
        "| reduction | ms per batch | × sum |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {ms:.1f} | {ms / per['sum']:.2f} |" for name, ms in per.items()]
    ratio = per["max, (B, n, n, d)"] / per["max, one per graph"]
    lines += ["", f"One maximum per graph is {ratio:.0f}× faster than the (B, n, n, d) max, with the same values."]
    out = results_dir(args, device)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pooling.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
