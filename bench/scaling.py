"""Cost as n grows: time and memory of one training step per token, for sentences of n = 128 .. 4096 tokens.

    python -m bench.scaling            # about 10 min on 2 CPU cores (OMP_NUM_THREADS=1)
    python -m bench.scaling --quick    # a smoke run in seconds: checks the script, measures nothing

Every batch holds the same number of tokens (``--tokens``, default 8192): B = tokens // n sequences of
exactly n tokens each, so a model whose cost is linear in n costs the same per token at every n, and one
whose cost is quadratic costs n times more per token as n doubles. For each case and n it times one
training step without an optimiser (forward, cross-entropy on random labels, ``loss.backward()``) and
records its peak memory:

  transformer/complete (sparse)   DGL message passing over all n^2 pairs (self loops included)
  transformer/complete (dense)    the padded twin: one fused ``scaled_dot_product_attention`` per layer, no mask
                                  (a flash kernel on the CPU since torch 2.2: n^2 time, but no n x n scores stored)
  transformer/complete (dense, masked)  the same attention through a (B, n, n) mask, as any batch with
                                  padding runs it: the scores are stored, n^2 memory
  transformer/window (sparse)     each token hears the tokens at most ``--window`` (2) positions away
  transformer/tree (sparse)       the tree, both ways along every edge
  transformer/bpt (sparse)        BP-Transformer's binary-partition graph (k = ``--k``, 4): n - 1 span
                                  nodes, O(k n log n) edges (data/graphs/bpt.py: bpt_edges)
  treelstm/tree (recursive)       the Child-Sum Tree-LSTM, level by level (models/recursive.py)

The models are the repository's defaults, read from conf/encoder/default.yaml + conf/model/transformer.yaml
(readout mean) and conf/model/treelstm.yaml (readout root), built by ``models.encoder.build_model``, in
training mode (dropout on), over a vocabulary of 20 random token ids. The tree is the same deterministic
4-ary heap for every sentence: ``heads[i] = (i - 1) // 4`` (root 0), of height ceil(log4 n), so the
Tree-LSTM walks about log4(n) levels. The dense complete path reads no edge list (``models/dense.py``:
``to_dense(complete=True)``), so its batch is built without one; its ``edges`` column counts the n^2 pairs
it attends over.

Graphs are built before anything is timed. Time: one warm-up step, then the median of ``--repeats`` (3;
1 with ``--quick``). Memory on the CPU: the peak resident set of the step, i.e. Linux's VmHWM after the
step (reset before it by writing 5 to /proc/self/clear_refs) minus VmRSS just before it, after
``gc.collect()`` and glibc's ``malloc_trim(0)`` have handed freed heap pages back (so memory kept from an
earlier step is not silently reused and missed); the median over the repeats. On a GPU (picked
automatically, or ``--device cuda``): ``torch.cuda.max_memory_allocated`` above what was allocated before the
step. PyPI's DGL is a CPU build, so on a GPU without DGL's CUDA build the sparse cases are skipped with one
line (the dense and recursive ones run).
A sparse case whose batch would exceed ``--max-edges`` edges (the complete graph at n = 4096 holds
8192 * 4096 = 33.5M) is recorded as skipped, as is one that raises RuntimeError or MemoryError.

Writes to ``--out`` (default bench/results/<machine>/, e.g. ``cpu-2core``; ``--machine`` names it): ``scaling.csv`` (one row per case x n), ``scaling.md``
(time and memory per token by n, the growth exponent of the cost per *sequence* in n per case, edges per
token of complete / bpt / window, two PASS/FAIL checks, the command, wall time and machine) and
``scaling.png`` (time and memory per token against n, log-log, one line per case).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import dgl
import torch
import torch.nn.functional as F
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import add_arguments, invocation, pick_device, results_dir, sparse_available, sparse_skip_line  # noqa: E402
from data.graphs import GraphConstruction  # noqa: E402
from data.vocab import SPECIALS  # noqa: E402
from engine.io import write_csv  # noqa: E402
from models.encoder import build_model  # noqa: E402

# (model config, graph, impl): the cases, in table order
CASES = (
    ("transformer", "complete", "sparse"),
    ("transformer", "complete", "dense"),
    ("transformer", "complete", "dense, masked"),
    ("transformer", "window", "sparse"),
    ("transformer", "tree", "sparse"),
    ("transformer", "bpt", "sparse"),
    ("treelstm", "tree", "recursive"),
)
SIZES = (128, 512, 1024, 2048, 4096)
EDGE_NS = (100, 1000, 2000)  # where the edge-count table compares complete, bpt and window
VOCAB, CLASSES = 20, 10
CHECK_N = 2048  # check (a) compares memory here
MIB = 2**20


def case_name(model: str, graph: str, impl: str) -> str:
    return f"{model}/{graph} ({impl})"


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------
def heap_heads(n: int) -> list[int]:
    """A 4-ary heap over n tokens: token i > 0 hangs under token (i - 1) // 4; the root is token 0."""
    return [-1] + [(i - 1) // 4 for i in range(1, n)]


def model_config(name: str) -> dict:
    """conf/encoder/default.yaml overlaid with conf/model/<name>.yaml, as Hydra composes them."""
    cfg = yaml.safe_load((ROOT / "conf" / "encoder" / "default.yaml").read_text())
    own = yaml.safe_load((ROOT / "conf" / "model" / f"{name}.yaml").read_text())
    own.pop("defaults", None)
    cfg.update(own)
    return cfg


def edges_per_sequence(graph: str, n: int, k: int, window: int) -> int:
    """Edges of one sentence's graph (complete: n^2 without building it)."""
    if graph == "complete":
        return n * n
    return GraphConstruction(name=graph, k=k, window=window)([SPECIALS.index("<unk>")] * n, heap_heads(n)).num_edges()


def make_batch(graph: str, impl: str, n: int, batch: int, k: int, window: int, seed: int):
    """B copies of one sentence's graph with random token ids, and the construction the model is told about."""
    construction = GraphConstruction(name=graph, k=k, window=window)
    if impl == "dense, masked":  # every pair, through an explicit mask: what a batch with padding runs
        construction = GraphConstruction(name="window", window=n)
    # the dense complete path never reads the edge list: build its batch without one
    builder = GraphConstruction(name="none") if (graph == "complete" and impl == "dense") else construction
    one = builder([0] * n, heap_heads(n))
    g = dgl.batch([one] * batch)
    gen = torch.Generator().manual_seed(seed)
    tok = g.ndata["tok"].clone()
    is_token = g.ndata["pos"] >= 0  # bpt's span nodes keep their <phrase> id
    tok[is_token] = torch.randint(len(SPECIALS), VOCAB, (int(is_token.sum()),), generator=gen)
    g.ndata["tok"] = tok
    labels = torch.randint(0, CLASSES, (batch,), generator=gen)
    return g, labels, construction


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------
def _malloc_trim():
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    return lambda: trim(0)


MALLOC_TRIM = _malloc_trim()


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def rss_peak_supported() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _status_kib("VmHWM")
        return True
    except OSError:
        return False


class Meter:
    """Wraps one step: its wall time and its peak memory above what was in use before it (bytes)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cpu_peak = device.type == "cpu" and rss_peak_supported()

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def __call__(self, step) -> tuple[float, int | None]:
        gc.collect()
        if self.device.type == "cuda":
            self.sync()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        elif self.cpu_peak:
            MALLOC_TRIM()
            base = _status_kib("VmRSS") * 1024
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
        t0 = time.perf_counter()
        step()
        self.sync()
        seconds = time.perf_counter() - t0
        if self.device.type == "cuda":
            return seconds, torch.cuda.max_memory_allocated() - base
        if self.cpu_peak:
            return seconds, max(0, _status_kib("VmHWM") * 1024 - base)
        return seconds, None


def measure(model, g, labels, meter: Meter, repeats: int) -> tuple[float, float | None, int]:
    """(median seconds, median peak bytes, repeats taken) of forward + loss.backward(), after one warm-up."""

    def step():
        F.cross_entropy(model(g), labels).backward()

    model.zero_grad(set_to_none=True)
    meter(step)  # warm-up
    times, peaks = [], []
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        seconds, peak = meter(step)
        times.append(seconds)
        peaks.append(peak)
    peak = None if any(p is None for p in peaks) else statistics.median(peaks)
    return statistics.median(times), peak, repeats


NO_SPARSE = "this DGL build cannot put graphs on the device: sparse cases need DGL there"


def run_case(args, device, meter, model_name, graph, impl, n) -> dict:
    batch = max(1, args.tokens // n)
    row = {
        "case": case_name(model_name, graph, impl),
        "impl": impl,
        "n": n,
        "batch": batch,
        "tokens": batch * n,
        "edges": None,
        "ms": None,
        "us_per_token": None,
        "peak_mib": None,
        "bytes_per_token": None,
        "skipped": "",
    }
    if impl == "sparse" and not args.dgl_on_device:
        row["skipped"] = NO_SPARSE
        return row
    try:
        row["edges"] = batch * edges_per_sequence(graph, n, args.k, args.window)
        if impl == "sparse" and row["edges"] > args.max_edges:
            row["skipped"] = f"{row['edges'] / 1e6:.1f}M edges > --max-edges {args.max_edges / 1e6:.0f}M"
            return row
        g, labels, construction = make_batch(graph, impl, n, batch, args.k, args.window, seed=n)
        cfg = model_config(model_name)
        if model_name == "transformer":
            cfg["impl"], cfg["readout"] = impl.split(",")[0], "mean"
        torch.manual_seed(0)
        model = build_model(cfg, VOCAB, CLASSES, construction).to(device).train()
        if device.type != "cpu" and args.dgl_on_device:
            g = g.to(device)
        seconds, peak, _ = measure(model, g, labels.to(device), meter, args.repeats)
    except (RuntimeError, MemoryError, dgl.DGLError) as e:  # recorded as skipped, the run goes on
        row["skipped"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
        return row
    finally:
        gc.collect()
    row["ms"] = round(1000 * seconds, 3)
    row["us_per_token"] = round(1e6 * seconds / row["tokens"], 4)
    if peak is not None:
        row["peak_mib"] = round(peak / MIB, 2)
        row["bytes_per_token"] = round(peak / row["tokens"], 1)
    return row


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------
def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(y) on log(x) over the points with y > 0 (None with fewer than 2)."""
    pts = [(math.log(x), math.log(y)) for x, y in points if y and y > 0]
    if len(pts) < 2:
        return None
    mx, my = statistics.mean(p[0] for p in pts), statistics.mean(p[1] for p in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def exponents(rows: list[dict]) -> dict[str, tuple[float | None, float | None]]:
    """Per case: the growth exponent in n of the time and of the peak memory per sequence."""
    out = {}
    for case in dict.fromkeys(r["case"] for r in rows):
        done = [r for r in rows if r["case"] == case and not r["skipped"]]
        t = slope([(r["n"], r["ms"] / r["batch"]) for r in done])
        m = slope([(r["n"], r["peak_mib"] / r["batch"]) for r in done if r["peak_mib"] is not None])
        out[case] = (t, m)
    return out


def checks(rows: list[dict]) -> list[str]:
    """(a) bpt's peak memory at most 1/10 of the dense complete graph's, the masked one (attention
    materialised, as in any batch with padding) and, reported beside it, the fused one (no mask: a flash
    kernel that never stores the scores); (b) bpt's time per token log-linear."""
    by = {(r["case"], r["n"]): r for r in rows if not r["skipped"]}
    bpt = case_name("transformer", "bpt", "sparse")
    lines = []
    for impl in ("dense, masked", "dense"):
        lines.append(memory_check(by, bpt, case_name("transformer", "complete", impl)))
    return lines + time_check(by, bpt)


def memory_check(by: dict, bpt: str, dense: str) -> str:
    common = sorted(
        n
        for (c, n), r in by.items()
        if c == bpt and (dense, n) in by and r["peak_mib"] is not None and by[(dense, n)]["peak_mib"] is not None
    )
    if not common:
        return f"- check (a) memory: **FAIL** (bpt and {dense} were not both measured at any n)"
    n = CHECK_N if CHECK_N in common else common[-1]
    b, d = by[(bpt, n)]["peak_mib"], by[(dense, n)]["peak_mib"]
    ok = b <= d / 10
    return (
        f"- check (a) memory, n={n}: bpt peak {b:.1f} MiB / {dense} peak {d:.1f} MiB = "
        f"{b / d if d else float('inf'):.3f} <= 0.1: **{'PASS' if ok else 'FAIL'}**"
    )


def time_check(by: dict, bpt: str) -> list[str]:
    lines = []
    ns = sorted(n for (c, n) in by if c == bpt)
    if len(ns) >= 2:
        lo, hi = ns[0], ns[-1]
        ratio = by[(bpt, hi)]["us_per_token"] / by[(bpt, lo)]["us_per_token"]
        bound = math.log2(hi) / math.log2(lo) * 1.5
        lines.append(
            f"- check (b) time, bpt: time per token at n={hi} / at n={lo} = {ratio:.2f} <= "
            f"log2({hi}) / log2({lo}) x 1.5 = {bound:.2f}: **{'PASS' if ratio <= bound else 'FAIL'}**"
        )
    else:
        lines.append("- check (b) time: **FAIL** (bpt was measured at fewer than two sizes)")
    return lines


def edge_table(ns, k: int, window: int) -> list[str]:
    lines = [
        f"**Edges per token** (`g.num_edges() / n` of one sentence's graph, self loops included; bpt's count "
        f"includes its span nodes' edges; k={k}, window={window})",
        "",
        "| graph | " + " | ".join(f"n={n}" for n in ns) + " |",
        "|---|" + "---:|" * len(ns),
    ]
    for graph in ("complete", "bpt", "window"):
        con = GraphConstruction(name=graph, k=k, window=window)
        cells = [f"{con([0] * n).num_edges() / n:.1f}" for n in ns]
        lines.append(f"| {graph} | " + " | ".join(cells) + " |")
    return lines


def summary(rows, edges: list[str], args, machine: str, command: str, wall: float) -> str:
    ns = sorted({r["n"] for r in rows})
    cases = list(dict.fromkeys(r["case"] for r in rows))
    by = {(r["case"], r["n"]): r for r in rows}

    def table(title: str, key: str, fmt) -> list[str]:
        out = [title, "", "| case | " + " | ".join(f"n={n}" for n in ns) + " |", "|---|" + "---:|" * len(ns)]
        for case in cases:
            cells = []
            for n in ns:
                r = by.get((case, n))
                if r is None:
                    cells.append("–")
                elif r["skipped"]:
                    cells.append("skipped")
                else:
                    cells.append(fmt(r[key]) if r[key] is not None else "–")
            out.append(f"| {case} | " + " | ".join(cells) + " |")
        return out

    exps = exponents(rows)
    memory_how = (
        "peak `torch.cuda.max_memory_allocated` above what was allocated before the step"
        if args.device.type == "cuda"
        else "peak resident memory of the step (VmHWM after it, reset by /proc/self/clear_refs, minus VmRSS "
        "before it, after gc + malloc_trim)"
    )
    lines = [
        "# Cost as n grows: one training step per token",
        "",
        f"Command: `{command}`. Wall time {wall / 60:.1f} min. Machine: {machine}.",
        "",
        f"Every batch holds {args.tokens} tokens: B = {args.tokens} // n sequences of exactly n tokens (B = 1 "
        f"when n > {args.tokens}). One step = forward + cross-entropy + `loss.backward()` (no optimiser), "
        f"training mode; time = median of {args.repeats} step(s) after one warm-up; memory = {memory_how}, "
        f"median over the same steps. Models: the repository defaults (conf/encoder/default.yaml + "
        f"conf/model/transformer.yaml, readout mean; conf/model/treelstm.yaml, readout root). Trees: a "
        f"4-ary heap, `heads[i] = (i - 1) // 4`. Sparse cases above {args.max_edges / 1e6:.0f}M edges per "
        "batch are skipped (`--max-edges`).",
        "",
    ]
    lines += table("**Time per token, µs**", "us_per_token", lambda v: f"{v:.2f}")
    lines += [""]
    lines += table("**Peak memory per token, bytes**", "bytes_per_token", lambda v: f"{v:,.0f}")
    lines += [
        "",
        "**Growth exponents**: the least-squares slope of log(cost per sequence) on log(n) over the measured "
        "sizes, cost per sequence = step time / B and peak memory / B (1: linear in n, 2: quadratic; "
        "complete attention computes n^2 scores per sequence). The `dense, masked` case is the same attention "
        "through an explicit (B, n, n) mask, as every batch with padding runs it: torch then stores the scores. "
        "The dense complete case calls one fused "
        "`scaled_dot_product_attention` per layer with no mask; where torch runs it as a flash kernel (on the "
        "CPU since torch 2.2) the n x n scores are never stored, so its time can grow as n^2 while its memory "
        "grows as n. The sparse complete graph stores scores per edge, so its memory per sequence approaches "
        "n^2 once the edges outweigh the per-token activations.",
        "",
        "| case | time exponent | memory exponent | sizes measured |",
        "|---|---:|---:|---|",
    ]
    for case in cases:
        t, m = exps[case]
        measured = [str(r["n"]) for r in rows if r["case"] == case and not r["skipped"]]
        lines.append(
            f"| {case} | {'–' if t is None else f'{t:.2f}'} | {'–' if m is None else f'{m:.2f}'} | "
            f"{', '.join(measured) or 'none'} |"
        )
    skipped = [r for r in rows if r["skipped"]]
    if skipped:
        lines += ["", "Skipped:", ""]
        lines += [f"- {r['case']}, n={r['n']}: {r['skipped']}" for r in skipped]
    lines += [""] + edges
    lines += [
        "",
        "**Checks.** (a) At n=2048 (or the largest n where both ran) bpt's peak memory is at most 1/10 of the "
        "dense complete graph's. (b) bpt's time per token grows at most log-linearly: time per token at the "
        "largest n over that at the smallest n is at most log2(n_max) / log2(n_min) x 1.5 (with the defaults, "
        "log2(4096) / log2(128) x 1.5 = 2.57).",
        "",
    ]
    lines += checks(rows)
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path, machine: str, tokens: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for case in dict.fromkeys(r["case"] for r in rows):
        done = [r for r in rows if r["case"] == case and not r["skipped"]]
        style = "s--" if "dense" in case else ("x:" if "recursive" in case else "o-")
        for ax, key in zip(axes, ("us_per_token", "bytes_per_token")):
            pts = [(r["n"], r[key]) for r in done if r[key]]
            if pts:
                ax.plot(*zip(*pts), style, label=case)
    ns = sorted({r["n"] for r in rows})
    for ax, ylabel in zip(axes, ("µs per token (forward + backward)", "peak bytes per token")):
        ax.set(xscale="log", yscale="log", xlabel="tokens per sequence n", ylabel=ylabel)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3, which="both")
    axes[0].set_title("time per token")
    axes[1].set_title("memory per token")
    axes[1].legend(fontsize=7)
    fig.suptitle(f"one training step, {tokens} tokens per batch — {machine}", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine_name(device: torch.device) -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
    return (
        f"{name}, {platform.system()} {platform.release()}, python {platform.python_version()}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), dgl {dgl.__version__}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)  # --device, --machine, --out
    p.add_argument("--sizes", nargs="+", type=int, default=list(SIZES), help="tokens per sequence n")
    p.add_argument("--tokens", type=int, default=8192, help="tokens per batch: B = tokens // n")
    p.add_argument("--repeats", type=int, default=3, help="timed steps after the warm-up (median)")
    p.add_argument("--max-edges", type=float, default=20e6, help="skip sparse batches with more edges")
    p.add_argument("--k", type=int, default=4, help="bpt: tokens / spans per level on each side")
    p.add_argument("--window", type=int, default=2, help="window: positions heard on each side")
    p.add_argument("--edge-ns", nargs="+", type=int, default=list(EDGE_NS), help="n of the edges-per-token table")
    p.add_argument("--quick", action="store_true", help="1 repeat: checks the script, measures nothing")
    args = p.parse_args(argv)
    start = time.perf_counter()
    if args.quick:
        args.repeats = 1
    device = pick_device(args.device)
    out = results_dir(args, device)
    args.device = device
    args.dgl_on_device = sparse_available(device)
    if not args.dgl_on_device:
        print(sparse_skip_line(device, "the sparse cases are recorded as skipped"), flush=True)
    machine = machine_name(device)
    print(f"# {machine}", flush=True)
    meter = Meter(device)
    rows = []
    for model_name, graph, impl in CASES:
        for n in sorted(args.sizes):
            row = run_case(args, device, meter, model_name, graph, impl, n)
            rows.append(row)
            if row["skipped"] == NO_SPARSE:
                pass  # said once, above
            elif row["skipped"]:
                print(f"{row['case']:34s} n={n:5d}  skipped: {row['skipped']}", flush=True)
            else:
                mem = "–" if row["peak_mib"] is None else f"{row['peak_mib']:9.1f} MiB"
                print(
                    f"{row['case']:34s} n={n:5d} B={row['batch']:4d}  {row['ms']:10.1f} ms  "
                    f"{row['us_per_token']:8.2f} µs/token  {mem}",
                    flush=True,
                )
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "scaling.csv", rows)
    plot(rows, out / "scaling.png", machine, args.tokens)
    edges = edge_table(args.edge_ns, args.k, args.window)
    command = invocation("scaling", argv)
    text = summary(rows, edges, args, machine, command, time.perf_counter() - start)
    (out / "scaling.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
