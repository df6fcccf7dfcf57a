"""The hardware lottery, measured: the same layer as sparse message passing and as dense matrices.

    python -m bench.hardware_lottery                 # everything (make bench), ~7 min on 2 CPU cores
    python -m bench.hardware_lottery --quick         # a smoke run in seconds

For each graph construction and sentence length n, at a fixed number of tokens per batch (so
every cell does the same amount of per-token work), it times forward + backward of one encoder
block (aggregation + feed-forward) under ``impl=sparse`` (DGL), ``impl=dense`` (padded batch +
mask) and ``impl=auto``, and records peak memory. It also times:
  * the dense Transformer block against a bare ``scaled_dot_product_attention`` + feed-forward
    block of the same size (our overhead for being a GNN),
  * our sparse aggregator against the textbook DGL built-ins version (``reference_attention``),
  * train.py's loop, examples/s per impl.

The attention section measures the lottery itself on the same ``q``, ``k``, ``v``: one attention layer,
forward + backward, as message passing along the edges in stock torch (``models/torch_mp.py``: gather,
segment softmax, scatter; runs on any device), as DGL's ``u_dot_v -> edge_softmax -> u_mul_e`` (where this
DGL build runs on the device) and as ``scaled_dot_product_attention`` masked by the adjacency (no mask on
complete graphs), for two shapes: d = 64 in 4 heads (float32) and MiniLM's 12 heads of 32 (bfloat16 on a GPU,
float32 on the CPU).

    python -m bench.hardware_lottery --device cuda   # on a GPU (../shared/gpu/README.md): sparse DGL is skipped

What the machine cannot run (DGL's message passing on a GPU without DGL's CUDA build) is skipped with one
line; everything else runs. Writes to ``--out`` (default bench/results/<machine>/, e.g. ``cpu-2core``,
``nvidia-h100``; ``--machine`` names it): ``layer.csv``, ``layer.png`` (time vs n, one line per impl, one
panel per graph), ``attention.csv`` and ``attention.md``, ``summary.md`` (the ratio tables docs/hardware_lottery.md shows, with
the machine), ``overheads.csv``, ``training.csv``. Peak memory is what one forward + backward allocates above what was live before
it: ``torch.cuda.max_memory_allocated`` on a GPU, sampled live C-heap bytes on the CPU.
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import dgl
import dgl.function as fn
import torch
import torch.nn.functional as F
import yaml
from dgl.nn.functional import edge_softmax
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import add_arguments, invocation, pick_device, results_dir, sparse_available, sparse_skip_line  # noqa: E402
from data.graphs import GRAPH_KINDS, GraphConstruction  # noqa: E402
from models import MODEL_FAMILIES  # noqa: E402
from models.dense import to_dense  # noqa: E402
from models.encoder import Block, GraphEncoder  # noqa: E402
from models.knn import rebuild, rebuild_dense  # noqa: E402
from models.registry import yaml_config  # noqa: E402
from models.torch_mp import EdgeGraph, mp_attention  # noqa: E402

IMPLS = ("sparse", "dense", "auto")
NS = (16, 32, 64, 128, 256, 512, 1024)
# the attention section: (heads, head dim, dtype on a GPU); float32 on the CPU
SHAPES = {"d64, 4 heads": (4, 16, torch.float32), "MiniLM, 12 heads of 32": (12, 32, torch.bfloat16)}
ATTENTION_IMPLS = ("torch_mp", "dgl_sparse", "sdpa_dense")
# how far a repeat of the same impl moved in the committed CPU table (its `auto` column times the chosen impl again:
# 0.75x at worst, bench/results/cpu-2core/summary.md): a crossover is read beyond it too
REPEAT_NOISE = 0.25


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------
def default_graphs() -> list[str]:
    """The layers section's graphs: the registered graphs on the tokens alone (no added nodes) that need no
    parse (dep on these random trees is tree again). Any registered graph may be named with --graphs."""
    return [name for name, kind in GRAPH_KINDS.items() if not (kind.text_only or kind.adds_nodes)]


def default_attention_graphs() -> list[str]:
    """The attention section's graphs: the static registered graphs with edges between tokens (not knn's
    per-layer rebuild, not none's self loops), one tree of tree, dep and binary_tree."""
    return [
        name
        for name, kind in GRAPH_KINDS.items()
        if not (kind.text_only or kind.binary or kind.dynamic) and links_tokens(name)
    ]


def links_tokens(graph: str) -> bool:
    """Does ``graph`` put an edge between two different tokens of a 4-token sentence (none's self loops do not)?"""
    src, dst = GraphConstruction(name=graph)([3] * 4, [-1, 0, 1, 2]).edges()
    return bool((src != dst).any())


def random_heads(n: int, gen: torch.Generator) -> list[int]:
    """A random tree over n tokens: token i > 0 hangs under a uniformly chosen earlier token."""
    return [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]


def make_batch(graph: str, n: int, tokens: int, k: int = 4, window: int = 2) -> tuple[dgl.DGLGraph, GraphConstruction]:
    gen = torch.Generator().manual_seed(n)
    construction = GraphConstruction(name=graph, k=k, window=window)
    graphs = [construction([3] * n, random_heads(n, gen)) for _ in range(max(1, tokens // n))]
    return dgl.batch(graphs), construction


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn_, device, repeat: int) -> float:
    """Median seconds of ``fn_()`` over ``repeat`` runs, after one warm-up."""
    fn_()
    times = []
    for _ in range(repeat):
        sync(device)
        t = time.perf_counter()
        fn_()
        sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _live_bytes_fn():
    """Bytes the C heap holds live right now (glibc mallinfo2: in-use arena + mmapped blocks), or None."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return None

    def live() -> int:
        info = libc.mallinfo2()
        return info.uordblks + info.hblkhd

    return live


LIVE_BYTES = _live_bytes_fn()


def peak_memory_mib(fn_, device) -> float | None:
    """Peak memory one call of ``fn_`` allocates above what was live before it. On a GPU:
    ``torch.cuda.max_memory_allocated``. On the CPU: live C-heap bytes (torch and DGL both allocate
    there), sampled from a thread every ~0.1 ms while ``fn_`` runs (ops release the GIL)."""
    if device.type == "cuda":
        sync(device)
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        fn_()
        sync(device)
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    if LIVE_BYTES is None:
        return None
    base = LIVE_BYTES()
    peak, done = [base], threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], LIVE_BYTES())
            time.sleep(0.0001)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        fn_()
    finally:
        done.set()
        thread.join()
    return (max(peak[0], LIVE_BYTES()) - base) / 2**20


# --------------------------------------------------------------------------------------------
# One layer, three impls
# --------------------------------------------------------------------------------------------
def layer_step(model: GraphEncoder, g: dgl.DGLGraph, impl: str, x: torch.Tensor):
    """Forward + backward of the model's first block on features ``x`` (N, d), as the model runs it."""
    block = model.blocks[0]
    model.impl = impl
    chosen = model.choose_impl(g)

    def step():
        h = x.detach().requires_grad_()
        if chosen in ("sparse", "torch_sparse"):  # as GraphEncoder.sparse_forward runs one layer
            layer_graph = rebuild(model.construction, g, h.detach().to(g.device)) if model.dynamic else g
            out = block(EdgeGraph.of(layer_graph, h.device) if chosen == "torch_sparse" else layer_graph, h)
        else:  # as GraphEncoder.dense_states runs one layer, padding included
            dg, tokens = model.dense_graph(g)
            hp = dg.pad(h)
            out = dg.unpad(
                block(rebuild_dense(model.construction, dg, hp, tokens, model.edge_types) if model.dynamic else dg, hp)
            )
        out.square().mean().backward()

    return step, chosen


def measure_layers(args, device, graphs, impls, ns) -> list[dict]:
    rows = []
    for graph in graphs:
        for n in ns:
            g, construction = make_batch(graph, n, args.tokens, k=args.k)
            g = g.to(device) if args.dgl_on_device else g
            torch.manual_seed(0)
            knobs = dict(hidden_dim=args.dim, num_heads=args.heads, num_layers=1, dropout=0.0, impl="sparse")
            # the shared encoder's keys (conf/encoder/default.yaml) with this aggregator
            config = yaml_config("transformer", name=args.model, dense_min_density=args.threshold, **knobs)
            model = GraphEncoder(config, 8, 2, construction).to(device)
            x = torch.randn(g.num_nodes(), args.dim, device=device)
            density = (construction.k + 1) / n if graph == "knn" else g.num_edges() / (g.num_nodes() * n)
            for impl in impls:  # sparse: DGL's kernels, or stock torch where DGL cannot reach the device (chosen)
                step, chosen = layer_step(model, g, impl, x)
                seconds = timed(step, device, args.repeat)
                peak = None if "memory" in args.skip else peak_memory_mib(step, device)
                row = {
                    "graph": graph,
                    "n": n,
                    "impl": impl,
                    "chosen": chosen,
                    "batch": g.batch_size,
                    "edges": g.num_edges(),
                    "density": round(density, 5),
                    "ms": round(1000 * seconds, 3),
                }
                if peak is not None:
                    row["peak_mib"] = round(peak, 1)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


# --------------------------------------------------------------------------------------------
# The lottery itself: one attention layer on the same q, k, v, as message passing and as dense SDPA
# --------------------------------------------------------------------------------------------
def one_graph(graph: str, n: int, window: int = 2, k: int = 4) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(src, dst, nodes) of one sentence of n tokens under ``graph`` (bpt adds its span nodes)."""
    gen = torch.Generator().manual_seed(n)
    g = GraphConstruction(name=graph, window=window, k=k)([3] * n, random_heads(n, gen))
    src, dst = g.edges()
    return src, dst, g.num_nodes()


def attention_steps(graph: str, n: int, tokens: int, heads: int, dim: int, dtype, device, sparse: bool) -> tuple:
    """The forward + backward steps of each impl on one batch of ``tokens // n`` copies of one graph, and the
    batch's (size, edges). The dense mask is the adjacency, shared by the batch (none for complete graphs)."""
    src, dst, m = one_graph(graph, n)
    b = max(1, tokens // n)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, heads, m, dim, generator=gen).to(device, dtype) for _ in range(3))
    offsets = (torch.arange(b) * m).repeat_interleave(len(src))
    bsrc, bdst = (src.repeat(b) + offsets).to(device), (dst.repeat(b) + offsets).to(device)
    mask = None
    if graph != "complete":
        mask = torch.zeros(m, m, dtype=torch.bool)
        mask[dst, src] = True  # row i: the nodes i attends over (edge j -> i)
        mask = mask.to(device)

    def flat(x):  # (B, H, m, d) -> (B m, H, d): the nodes of the batched graph
        return x.transpose(1, 2).reshape(b * m, heads, dim)

    def leaves(xs):
        return [x.detach().clone().requires_grad_() for x in xs]

    qf, kf, vf = leaves([flat(q), flat(k), flat(v)])
    qd, kd, vd = leaves([q, k, v])

    def torch_mp():
        mp_attention(qf, kf, vf, bsrc, bdst).float().square().mean().backward()

    def sdpa_dense():
        F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask).float().square().mean().backward()

    steps = {"torch_mp": torch_mp, "sdpa_dense": sdpa_dense}
    if sparse:
        g = dgl.graph((bsrc, bdst), num_nodes=b * m)

        def dgl_sparse():
            scores = dgl.ops.u_dot_v(g, kf, qf) * dim**-0.5  # (E, H, 1): k_j . q_i on edge j -> i
            dgl.ops.u_mul_e_sum(g, vf, edge_softmax(g, scores)).float().square().mean().backward()

        steps["dgl_sparse"] = dgl_sparse
    return steps, b, b * len(src)


def measure_attention(args, device, sparse: bool) -> tuple[list[dict], list[str]]:
    """The attention cells' timings (one row per implementation), and the cells not measured, each with why (over
    ``--attn-max-edges``, or out of GPU memory): the table's '–' says which, not only the log."""
    rows, skipped = [], []
    for shape, (heads, dim, gpu_dtype) in SHAPES.items():
        dtype = gpu_dtype if device.type == "cuda" else torch.float32
        tokens = args.attn_tokens * (2 if device.type == "cuda" and dtype == torch.bfloat16 else 1)
        for graph in args.attn_graphs:
            for n in args.attn_ns:
                edges = max(1, tokens // n) * len(one_graph(graph, n)[0])
                if edges > args.attn_max_edges:
                    skipped.append(f"{shape}/{graph}/n={n} ({edges:,} edges)")
                    continue
                steps, b, edges = attention_steps(graph, n, tokens, heads, dim, dtype, device, sparse)
                for impl, step in steps.items():
                    row = {"shape": shape, "dtype": str(dtype).removeprefix("torch."), "graph": graph, "n": n}
                    try:
                        ms = round(1000 * timed(step, device, args.repeat), 3)
                    except torch.cuda.OutOfMemoryError:  # a GPU's memory, not the edge cap, was the limit
                        torch.cuda.empty_cache()
                        skipped.append(f"{shape}/{graph}/n={n}/{impl} (out of GPU memory)")
                        continue
                    rows.append(row | {"batch": b, "edges": edges, "impl": impl, "ms": ms})
                    print(json.dumps(rows[-1]), flush=True)
                del steps
    if skipped:
        print(
            f"skipped: {len(skipped)} attention cells over --attn-max-edges {args.attn_max_edges:.0f} "
            "or out of memory: " + ", ".join(skipped),
            flush=True,
        )
    return rows, skipped


def attention_summary(rows: list[dict]) -> list[str]:
    """The crossover tables: message passing (stock torch) / dense SDPA, graph x n, one table per shape."""
    out = []
    by = {(r["shape"], r["graph"], r["n"], r["impl"]): r["ms"] for r in rows}
    for shape in dict.fromkeys(r["shape"] for r in rows):
        mine = [r for r in rows if r["shape"] == shape]
        ns, graphs = sorted({r["n"] for r in mine}), list(dict.fromkeys(r["graph"] for r in mine))
        first = mine[0]
        out += [
            "",
            f"**One attention layer, {shape} ({first['dtype']}): message passing in stock torch ms / dense SDPA ms** "
            "(below 1: sparse wins; in brackets DGL's message passing / dense SDPA where DGL runs on this device)",
            "",
            "| graph | " + " | ".join(f"n={n}" for n in ns) + " |",
            "|---|" + "---|" * len(ns),
        ]
        for graph in graphs:
            cells = []
            for n in ns:
                mp, dense, dgl_ms = (by.get((shape, graph, n, i)) for i in ("torch_mp", "sdpa_dense", "dgl_sparse"))
                cell = f"{mp / dense:.2f}" if mp and dense else "–"
                cells.append(cell + (f" ({dgl_ms / dense:.2f})" if dgl_ms and dense else ""))
            out.append(f"| {graph} | " + " | ".join(cells) + " |")
    return out


# --------------------------------------------------------------------------------------------
# Overheads: dense block vs a bare SDPA block; sparse aggregator vs the textbook DGL version
# --------------------------------------------------------------------------------------------
class BareBlock(nn.Module):
    """Pre-LN attention + feed-forward with nothing else: the floor for a dense Transformer block."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):  # (B, n, d)
        b, n, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d))
        return x + self.ffn(self.norm2(x))


def reference_attention(agg, g, h):
    """The textbook DGL version: separate q, k, v, score, scale, softmax, weighted sum."""
    heads, dh = agg.num_heads, agg.head_dim
    with g.local_scope():
        g.ndata["q"] = agg.query(h).view(-1, heads, dh)
        g.ndata["k"] = agg.key(h).view(-1, heads, dh)
        g.ndata["v"] = agg.value(h).view(-1, heads, dh)
        g.apply_edges(fn.u_dot_v("k", "q", "s"))
        g.edata["a"] = edge_softmax(g, g.edata["s"] / dh**0.5)
        g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "o"))
        return agg.out(g.ndata["o"].flatten(1))


def measure_overheads(args, device, ns) -> list[dict]:
    rows = []
    for n in ns:
        b = max(1, args.tokens // n)
        torch.manual_seed(0)
        block = Block(
            GraphEncoder(yaml_config("transformer", hidden_dim=args.dim, num_heads=args.heads), 8, 2)
            .blocks[0]
            .aggregator,
            args.dim,
            True,
            2,
            0.0,
            "pre",
        ).to(device)
        bare = BareBlock(args.dim, args.heads).to(device)
        x = torch.randn(b, n, args.dim, device=device)
        g, _ = make_batch("complete", n, args.tokens)
        dg = to_dense(g, device, complete=True)

        def ours():
            block(dg, x.detach().requires_grad_()).square().mean().backward()

        def floor():
            bare(x.detach().requires_grad_()).square().mean().backward()

        row = {
            "n": n,
            "dense_block_ms": 1000 * timed(ours, device, args.repeat),
            "bare_sdpa_block_ms": 1000 * timed(floor, device, args.repeat),
        }
        if args.dgl_on_device:
            gd = g.to(device)
            h = torch.randn(gd.num_nodes(), args.dim, device=device)
            agg = block.aggregator

            def ours_sparse():
                agg(gd, h.detach().requires_grad_()).square().mean().backward()

            def textbook():
                reference_attention(agg, gd, h.detach().requires_grad_()).square().mean().backward()

            row["sparse_agg_ms"] = 1000 * timed(ours_sparse, device, args.repeat)
            row["textbook_dgl_ms"] = 1000 * timed(textbook, device, args.repeat)
        rows.append({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def measure_training(args, impls) -> list[dict]:
    """train.py's loop, examples/s per impl, on a short default ListOps run."""
    from hydra import compose, initialize_config_dir

    from train import run

    rows = []
    for model in ("gcn", "gat", "transformer"):
        for graph in ("complete", "tree"):
            for impl in impls:
                with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
                    cfg = compose(
                        "config",
                        overrides=[
                            f"model={model}",
                            f"graph={graph}",
                            f"model.impl={impl}",
                            "logger=none",
                            "trainer.progress=false",
                            f"trainer.max_epochs={args.train_epochs}",
                            f"dataset.num_train={args.train_examples}",
                            "dataset.num_val=200",
                            "dataset.num_test=200",
                            f"model.dense_min_density={args.threshold}",
                            f"device={args.device_name}",
                            "+dataset.cache_dir=null",  # graphs built in memory before the clock starts, as ever
                        ],
                    )
                with tempfile.TemporaryDirectory() as out:  # checkpoints are not benchmark results
                    r = run(cfg, out)
                rows.append(
                    {
                        "model": model,
                        "graph": graph,
                        "impl": impl,
                        "examples_per_second": r["examples_per_second"],
                        "test_acc": r["test_acc"],
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    return rows


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------
def write_csv(path: Path, rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def plot(rows: list[dict], path: Path, machine: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    fig, axes = plt.subplots(1, len(graphs), figsize=(3.6 * len(graphs), 3.4), sharey=True, squeeze=False)
    for ax, graph in zip(axes[0], graphs):
        for impl, style in (("sparse", "o-"), ("dense", "s-"), ("auto", "x--")):
            pts = [(r["n"], r["ms"]) for r in rows if r["graph"] == graph and r["impl"] == impl]
            if pts:
                ax.plot(*zip(*pts), style, label=impl)
        ax.set(xscale="log", yscale="log", title=graph, xlabel="tokens per sentence n")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("ms, forward + backward")
    axes[0][-1].legend()
    fig.suptitle(f"one encoder block, fixed tokens per batch — {machine}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary(rows, overheads, training, memory, machine, args, attention=()) -> str:
    by = {(r["graph"], r["n"], r["impl"]): r for r in rows}
    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    ns = sorted({r["n"] for r in rows})
    out = [
        f"Machine: {machine}. {args.model} block, d={args.dim}, {args.heads} heads, {args.tokens} tokens per "
        f"batch in the layer section, median of {args.repeat} forward+backward passes. `impl=auto` threshold: dense when edge density "
        f">= {args.threshold}.",
        "",
    ]
    if rows:  # the layer section
        out += [
            "**sparse ms / dense ms** (above 1: dense is faster; `auto` column: auto ms / best ms)",
            "",
            "| graph | " + " | ".join(f"n={n}" for n in ns) + " |",
            "|---|" + "---|" * len(ns),
        ]
        crossovers, clear = {}, {}
        for graph in graphs:
            cells = []
            for n in ns:
                s, d, a = by.get((graph, n, "sparse")), by.get((graph, n, "dense")), by.get((graph, n, "auto"))
                if not (s and d):
                    cells.append("–")
                    continue
                ratio = s["ms"] / d["ms"]
                cell = f"{ratio:.2f}"
                if a:
                    cell += f" ({a['ms'] / min(s['ms'], d['ms']):.2f})"
                cells.append(cell)
                if ratio < 1 and graph not in crossovers:
                    crossovers[graph] = n
                if ratio < 1 - REPEAT_NOISE and graph not in clear:
                    clear[graph] = n
            out.append(f"| {graph} | " + " | ".join(cells) + " |")
        out += [
            "",
            "Crossover (smallest n where sparse / dense < 1): "
            + (", ".join(f"{g}: n={n}" for g, n in crossovers.items()) if crossovers else "none measured")
            + f". Beyond a repeat's noise (sparse / dense below {1 - REPEAT_NOISE:.2f}): "
            + (", ".join(f"{g}: n={n}" for g, n in clear.items()) if clear else "none measured")
            + ".",
        ]
    if attention:
        tokens = f"{args.attn_tokens} tokens per batch in the d64 shape, twice that in MiniLM's on a GPU"
        out += ["", f"Attention section: {tokens} (`attention.md`).", *attention_summary(attention)]
    if memory:
        out += [
            "",
            "**Peak memory above baseline, MiB (sparse / dense)**",
            "",
            "| graph | " + " | ".join(f"n={n}" for n in ns) + " |",
            "|---|" + "---|" * len(ns),
        ]
        for graph in graphs:
            out.append(
                f"| {graph} | "
                + " | ".join(
                    f"{memory.get((graph, 'sparse', n), '–')} / {memory.get((graph, 'dense', n), '–')}" for n in ns
                )
                + " |"
            )
    if overheads:
        out += [
            "",
            "**Overheads on complete graphs** (ms)",
            "",
            "| n | dense block | bare SDPA block | ratio | our sparse agg | textbook DGL agg | ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in overheads:
            sp = (
                f"{r['sparse_agg_ms']:.1f} | {r['textbook_dgl_ms']:.1f} | {r['sparse_agg_ms'] / r['textbook_dgl_ms']:.2f}"
                if "sparse_agg_ms" in r
                else "– | – | –"
            )
            out.append(
                f"| {r['n']} | {r['dense_block_ms']:.1f} | {r['bare_sdpa_block_ms']:.1f} | "
                f"{r['dense_block_ms'] / r['bare_sdpa_block_ms']:.2f} | {sp} |"
            )
    if training:
        out += [
            "",
            f"**train.py throughput, examples/s** ({args.train_examples} ListOps examples, "
            f"{args.train_epochs} epoch(s), default model sizes)",
            "",
            "| model | graph | sparse | dense | auto |",
            "|---|---|---|---|---|",
        ]
        keyed = {(r["model"], r["graph"], r["impl"]): r["examples_per_second"] for r in training}
        for model, graph in dict.fromkeys((r["model"], r["graph"]) for r in training):
            out.append(
                f"| {model} | {graph} | "
                + " | ".join(f"{keyed.get((model, graph, i), '–')}" for i in ("sparse", "dense", "auto"))
                + " |"
            )
    return "\n".join(out)


def machine_name(device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
        cpu = model
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {torch.get_num_threads()} threads, torch {torch.__version__}, dgl {dgl.__version__}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--graphs", nargs="+", default=default_graphs(), choices=list(GRAPH_KINDS))
    p.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    p.add_argument("--ns", nargs="+", type=int, default=list(NS))
    p.add_argument("--tokens", type=int, default=4096, help="tokens per batch (batch size = tokens // n)")
    p.add_argument("--model", default="transformer", choices=MODEL_FAMILIES["encoder"].models)  # an aggregator
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="impl=auto's dense_min_density (default: the value in conf/encoder/default.yaml)",
    )
    p.add_argument("--attn-graphs", nargs="+", default=default_attention_graphs(), choices=list(GRAPH_KINDS))
    p.add_argument("--attn-ns", nargs="+", type=int, default=None, help="default: 16..1024 (CPU), 64..4096 (GPU)")
    p.add_argument(
        "--attn-tokens",
        type=int,
        default=None,
        help="tokens per batch, d64 shape (MiniLM: twice, on a GPU); default 4096 on the CPU, 8192 on a GPU",
    )
    p.add_argument(
        "--attn-max-edges",
        type=float,
        default=None,
        help="skip bigger attention batches (default 0.5M edges on the CPU, 40M on a GPU)",
    )
    p.add_argument("--train-examples", type=int, default=2000)
    p.add_argument("--train-epochs", type=int, default=1)
    p.add_argument("--skip", nargs="*", default=[], choices=("layers", "attention", "memory", "overheads", "training"))
    p.add_argument("--quick", action="store_true", help="tiny sizes: checks the script, measures nothing")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.threshold is None:
        with open(ROOT / "conf" / "encoder" / "default.yaml") as f:  # every model's encoder settings
            args.threshold = float(yaml.safe_load(f)["dense_min_density"])
    device = pick_device(args.device)
    args.device_name = device.type
    gpu = device.type == "cuda"
    args.attn_ns = args.attn_ns or ([64, 256, 1024, 4096] if gpu else [16, 64, 256, 1024])
    args.attn_tokens = args.attn_tokens or (8192 if gpu else 4096)
    args.attn_max_edges = args.attn_max_edges or (40e6 if gpu else 5e5)
    args.dgl_on_device = sparse_available(device)
    if args.quick:
        args.ns, args.tokens, args.repeat, args.train_examples = [8, 16], 64, 1, 64
        args.attn_ns, args.attn_tokens = [8, 16], 64
    out = results_dir(args, device)
    out.mkdir(parents=True, exist_ok=True)
    machine = machine_name(device)
    print(f"# {machine} -> {out}", flush=True)
    if not args.dgl_on_device:  # impl=sparse resolves to torch_sparse there, as in train.py (models.impl.choose_impl)
        print(sparse_skip_line(device, "message passing in stock torch (models/torch_mp.py) runs instead"), flush=True)
    rows = [] if "layers" in args.skip else measure_layers(args, device, args.graphs, args.impls, args.ns)
    if rows:
        write_csv(out / "layer.csv", rows)
    start = time.perf_counter()
    attention, unmeasured = (
        ([], []) if "attention" in args.skip else measure_attention(args, device, args.dgl_on_device)
    )
    if attention or unmeasured:  # its own table too, so the section can be rerun alone (--skip layers ...)
        if attention:
            write_csv(out / "attention.csv", attention)
        command = invocation("hardware_lottery", argv)
        head = (
            f"`{command.strip()}` on {machine}: {time.perf_counter() - start:.0f} s, load average "
            f"{os.getloadavg()[0]:.1f} at the end. Median of {args.repeat} "
            f"forward + backward passes of one attention layer on the same q, k, v; {args.attn_tokens} tokens per "
            "batch (MiniLM's shape: twice that on a GPU), batch = tokens // n copies of one graph of n tokens."
        )
        why = [f"\nNot measured ('–' in the tables): {', '.join(unmeasured)}."] if unmeasured else []
        (out / "attention.md").write_text("\n".join([head, *attention_summary(attention), *why]) + "\n")
    memory = {(r["graph"], r["impl"], r["n"]): r["peak_mib"] for r in rows if "peak_mib" in r}
    overheads = [] if "overheads" in args.skip else measure_overheads(args, device, args.ns)
    training = [] if "training" in args.skip else measure_training(args, args.impls)
    if overheads:
        write_csv(out / "overheads.csv", overheads)
    if training:
        write_csv(out / "training.csv", training)
    if rows:
        plot(rows, out / "layer.png", machine)
    text = summary(rows, overheads, training, memory, machine, args, attention)
    if rows:  # without the layer section, summary.md (its tables) is left as it was
        (out / "summary.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
