"""The hardware lottery on a real model: the pretrained MiniLM's forward + backward, per implementation and graph.

    python -m bench.pretrained                     # -> bench/results/<machine>/pretrained.{csv,md} (~5 min, 1 thread)
    python -m bench.pretrained --quick --out DIR   # tiny sizes: checks the script, measures nothing

1. **Same batch, three implementations**: the complete graph over ``[CLS] pieces [SEP]`` run as DGL
   message passing (``models/minilm.py``, sparse), as its dense twin (padded batch, fused attention),
   and as HF's ``BertModel`` (transformers, its default attention), all with the same weights. One step
   is a forward pass, the mean-pooled embedding's squared norm as the loss, and a backward pass.
2. **Sparse graphs as sentences grow** (``--ns`` pieces per sentence, ``--tokens`` pieces per batch):
   window, bpt, none and dep, lifted to pieces by ``data/wordpiece.py``, against complete, each run
   sparse and dense. Sentences are random vocabulary pieces, one word each; ``dep`` is a random tree
   over them (n - 1 word edges both ways: what any dependency parse of that length costs).

Every configuration is also a check: the sparse and dense outputs (and HF's, on the complete graph)
must agree to ``--tol``; the script exits 1 if any does not, and the CSV keeps the difference.

    python -m bench.pretrained --device cuda       # on a GPU (../shared/gpu/README.md)

``--random-weights`` times the same shapes (all-MiniLM-L6-v2: 6 layers, d = 384, 12 heads of 32) with random
weights, shared by our model and HF's: the speed does not depend on the values. Where the MiniLM package is
not installed (it does not travel to the GPU machine), that is what runs, said in one line; so is DGL's
message passing on a GPU without DGL's CUDA build, and HF's BertModel where transformers is absent.
Writes to ``--out`` (default bench/results/<machine>/, e.g. ``cpu-2core``; ``--machine`` names it).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
import torch  # noqa: E402

from bench.machine import add_arguments, pick_device, results_dir, sparse_available, sparse_skip_line  # noqa: E402
from data.graphs import GRAPH_KINDS  # noqa: E402
from data.wordpiece import Pieces, piece_graph  # noqa: E402
from models.minilm import MiniLMEncoder, build_minilm, model_dir  # noqa: E402

NS = (16, 64, 128, 256)
# all-MiniLM-L6-v2's shapes (its config.json), for --random-weights where the package is absent
MINILM_SHAPES = {
    "vocab_size": 30522,
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
}
DEVICE = torch.device("cpu")  # where the models run: set by main


def sentences(n: int, count: int, seed: int, vocab: int = 30522) -> list[Pieces]:
    """``count`` sentences of n nodes ([CLS] + n - 2 random pieces + [SEP]), each piece its own word."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        ids = torch.randint(1000, vocab, (n - 2,), generator=gen).tolist()  # past [unused*] and specials
        out.append(Pieces([101, *ids, 102], [-1, *range(n - 2), -1], n - 2))
    return out


def random_heads(n: int, gen: torch.Generator) -> list[int]:
    """A random tree over n words (word 0 the root): each word's head is an earlier word."""
    return [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]


def make_batch(graph: str, pieces: list[Pieces], seed: int = 0) -> dgl.DGLGraph:
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for p in pieces:
        heads = random_heads(p.n_words, gen) if graph == "dep" else None
        graphs.append(piece_graph(p, graph, heads=heads, mask_id=103))
    return dgl.batch(graphs)


def sync():
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def timed(step, repeat: int) -> float:
    """Median seconds of ``step()`` over ``repeat`` runs, after one warm-up."""
    step()
    times = []
    for _ in range(repeat):
        sync()
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def embeddings(model, g: dgl.DGLGraph, impl: str) -> torch.Tensor:
    """(B, d) mean-pooled sentence vectors. With the graphs on the model's device, the model's own pooling;
    with a CPU-only DGL and the model on a GPU (dense), the same mean by index_add_ on the GPU."""
    if g.device == DEVICE:
        return model.sentence_embeddings(g, impl)
    h = model.node_states(g, impl)  # (N, d) on the GPU
    sizes = g.batch_num_nodes().to(DEVICE)
    graph_id = torch.repeat_interleave(torch.arange(len(sizes), device=DEVICE), sizes)
    w = g.ndata["pool"].to(h).unsqueeze(-1)
    total = h.new_zeros(len(sizes), h.shape[1]).index_add_(0, graph_id, h * w)
    return total / h.new_zeros(len(sizes), 1).index_add_(0, graph_id, w).clamp(min=1e-9)


def ours_step(model, g: dgl.DGLGraph, impl: str):
    def step():
        model.zero_grad(set_to_none=True)
        out = embeddings(model, g, impl)  # (B, d), mean pooled (not normalised)
        out.pow(2).sum().backward()
        return out.detach()

    return step


def hf_step(bert, input_ids: torch.Tensor, mask: torch.Tensor):
    def step():
        bert.zero_grad(set_to_none=True)
        h = bert(input_ids=input_ids, attention_mask=mask).last_hidden_state  # (B, n, d)
        w = mask.unsqueeze(-1).to(h)
        out = (h * w).sum(1) / w.sum(1)
        out.pow(2).sum().backward()
        return out.detach()

    return step


def on_device(g: dgl.DGLGraph, sparse: bool) -> dgl.DGLGraph:
    """The batch where the model is, when this DGL build can put it there (else it stays on the CPU)."""
    return g.to(DEVICE) if sparse else g


def measure_implementations(model, bert, n: int, tokens: int, repeat: int, sparse: bool = True) -> list[dict]:
    pieces = sentences(n, max(1, tokens // n), seed=n)
    g = on_device(make_batch("complete", pieces), sparse)
    ids = torch.tensor([p.ids for p in pieces], device=DEVICE)
    steps = {"dgl sparse": ours_step(model, g, "sparse")} if sparse else {}
    steps["dense twin"] = ours_step(model, g, "dense")
    if bert is not None:
        steps["hf BertModel"] = hf_step(bert, ids, torch.ones_like(ids))
    reference = steps["hf BertModel" if bert is not None else "dense twin"]()
    rows = []
    for name, step in steps.items():
        diff = (step() - reference).abs().max().item()
        rows.append(
            {"impl": name, "n": n, "batch": len(pieces), "ms": 1000 * timed(step, repeat), "max_abs_diff": diff}
        )
    base_ms = rows[-1]["ms"]
    for row in rows:
        row["vs_hf"] = row["ms"] / base_ms if bert is not None else ""
        if bert is None:
            row["max_abs_diff"] = ""  # nothing to compare with
    return rows


def graph_names() -> tuple[str, ...]:
    """Every registered graph that lifts from words to word pieces and needs no gold tree, in the registry's order."""
    return tuple(name for name, kind in GRAPH_KINDS.items() if kind.word_graph is not None and not kind.gold_tree)


def measure_graphs(model, ns, tokens: int, repeat: int, sparse: bool = True) -> list[dict]:
    rows = []
    for n in ns:
        pieces = sentences(n, max(1, tokens // n), seed=n)
        for graph in graph_names():
            g = on_device(make_batch(graph, pieces), sparse)
            impls = {"sparse": ours_step(model, g, "sparse")} if sparse else {}
            impls["dense"] = ours_step(model, g, "dense")
            diff = (impls["sparse"]() - impls["dense"]()).abs().max().item() if sparse else ""
            for impl, step in impls.items():
                rows.append(
                    {
                        "n": n,
                        "graph": graph,
                        "impl": impl,
                        "batch": len(pieces),
                        "edges_per_node": g.num_edges() / g.num_nodes(),
                        "ms": 1000 * timed(step, repeat),
                        "max_abs_diff": diff,
                    }
                )
    complete = {(r["n"], r["impl"]): r["ms"] for r in rows if r["graph"] == "complete"}
    for r in rows:
        r["vs_complete_same_impl"] = r["ms"] / complete[(r["n"], r["impl"])]
        r["vs_complete_dense"] = r["ms"] / complete[(r["n"], "dense")]
    return rows


FIELDS = (
    "table", "n", "graph", "impl", "batch", "edges_per_node", "ms", "max_abs_diff",
    "vs_hf", "vs_complete_same_impl", "vs_complete_dense",
)  # fmt: skip


def write_csv(path: Path, rows: list[dict]) -> None:
    """Both tables in one file: ``table`` says which; a column a table has not is left empty."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, restval="")
        writer.writeheader()
        writer.writerows(rows)


def summary(impl_rows, graph_rows, machine: str, command: str, load: str = "") -> str:
    lines = [
        "# The pretrained MiniLM: forward + backward, per implementation and graph",
        "",
        f"`{command}` on {machine}. Median of the timed repeats after a warm-up; one step = forward, "
        "mean pooling, loss = squared norm, backward. Each row's `max |diff|` is the check that the "
        "implementations compute the same thing (vs HF in the first table, sparse vs dense in the second).",
        *([f"Load average of the machine (1 min) at start and end: {load}."] if load else []),
        "",
        "## Same batch, complete graph",
        "",
        "| implementation | pieces / sentence | batch | ms | vs HF | max \\|diff\\| vs HF |",
        "|---|---|---|---|---|---|",
    ]

    def num(x, fmt):  # a cell left empty where its comparison could not run
        return "–" if x in ("", None) else format(x, fmt)

    for r in impl_rows:
        lines.append(
            f"| {r['impl']} | {r['n']} | {r['batch']} | {r['ms']:.1f} | {num(r['vs_hf'], '.2f')} "
            f"| {num(r['max_abs_diff'], '.1e')} |"
        )
    lines += [
        "",
        "## Sparse graphs as sentences grow",
        "",
        "ms per step; in brackets the ratio to the complete graph run the same way (sparse or dense).",
        "",
        "| pieces | graph | edges / node | sparse ms | dense ms | sparse / complete dense | max \\|diff\\| |",
        "|---|---|---|---|---|---|---|",
    ]
    by_key = {(r["n"], r["graph"], r["impl"]): r for r in graph_rows}
    for n in sorted({r["n"] for r in graph_rows}):
        for graph in graph_names():
            s, d = by_key.get((n, graph, "sparse")), by_key[(n, graph, "dense")]
            sparse = f"{s['ms']:.1f} ({s['vs_complete_same_impl']:.2f})" if s else "–"
            lines.append(
                f"| {n} | {graph} | {d['edges_per_node']:.1f} | {sparse} "
                f"| {d['ms']:.1f} ({d['vs_complete_same_impl']:.2f}) | {num(s and s['vs_complete_dense'], '.2f')} "
                f"| {num(d['max_abs_diff'], '.1e')} |"
            )
    return "\n".join(lines) + "\n"


def disagreements(rows: list[dict], tol: float) -> list[dict]:
    """The rows whose implementations differ by more than ``tol`` (NaN counts as a difference)."""
    return [r for r in rows if r["max_abs_diff"] != "" and not float(r["max_abs_diff"]) <= tol]


def load_models(random_weights: bool):
    """(our MiniLM, HF's BertModel or None) with the same weights: the pretrained ones, or, with
    ``random_weights`` or without the MiniLM package, random ones of the same shapes (one line says so)."""
    if not random_weights:
        try:
            model_dir()
        except ModuleNotFoundError as e:
            print(f"skipped: the pretrained weights ({e}); timing MiniLM's shapes with random weights", flush=True)
            random_weights = True
    try:
        from transformers import BertConfig, BertModel
    except ImportError:
        print("skipped: HF's BertModel (transformers is not installed)", flush=True)
        BertModel = None
    settings = {"dropout": 0.0, "attn_dropout": 0.0, "normalize": False}
    if not random_weights:
        model = build_minilm(settings, None).eval()
        bert = None
        if BertModel is not None:  # eval: no dropout
            bert = BertModel.from_pretrained(str(model_dir()), local_files_only=True).eval()
        return model, bert
    torch.manual_seed(0)
    model = MiniLMEncoder(MINILM_SHAPES, None, normalize=False, dropout=0.0, attn_dropout=0.0).eval()
    if BertModel is None:
        return model, None
    config = BertConfig(**MINILM_SHAPES, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    bert = BertModel(config, add_pooling_layer=False).eval()
    model.load_bert_state(bert.state_dict())
    return model, bert


def machine_name() -> str:
    if DEVICE.type == "cuda":
        return f"{torch.cuda.get_device_name(DEVICE)}, torch {torch.__version__}, dgl {dgl.__version__}"
    cpu = "cpu"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {torch.get_num_threads()} thread(s), torch {torch.__version__}, dgl {dgl.__version__}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)  # --device, --machine, --out
    p.add_argument("--ns", nargs="+", type=int, default=list(NS), help="pieces per sentence, [CLS] and [SEP] included")
    p.add_argument("--tokens", type=int, default=1024, help="pieces per batch (batch size = tokens // n)")
    p.add_argument("--impl-n", type=int, default=64, help="pieces per sentence for the same-batch comparison")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads (the machine's 2 cores are shared)")
    p.add_argument("--tol", type=float, default=1e-4, help="largest |diff| between implementations accepted")
    p.add_argument("--random-weights", action="store_true", help="MiniLM's shapes with random weights")
    p.add_argument("--quick", action="store_true", help="tiny sizes, one repeat: checks the script")
    args = p.parse_args(argv)
    if args.quick:
        args.ns, args.tokens, args.impl_n, args.repeat = [8], 16, 8, 1
    if min(args.ns + [args.impl_n]) < 3 or max(args.ns + [args.impl_n]) > 512:
        print("error: --ns and --impl-n must lie in 3..512 (BERT has 512 positions)", file=sys.stderr)
        return 2
    global DEVICE
    DEVICE = pick_device(args.device)
    out = results_dir(args, DEVICE)
    torch.set_num_threads(args.threads)
    load_start = os.getloadavg()[0]
    sparse = sparse_available(DEVICE)
    if not sparse:
        print(sparse_skip_line(DEVICE, "the dense twin runs"), flush=True)
    model, bert = load_models(args.random_weights)
    model, bert = model.to(DEVICE), (bert.to(DEVICE) if bert is not None else None)
    impl_rows = measure_implementations(model, bert, args.impl_n, args.tokens, args.repeat, sparse)
    graph_rows = measure_graphs(model, args.ns, args.tokens, args.repeat, sparse)
    out.mkdir(parents=True, exist_ok=True)
    rows = [{"table": "implementations", "graph": "complete", **r} for r in impl_rows]
    write_csv(out / "pretrained.csv", rows + [{"table": "graphs", **r} for r in graph_rows])
    command = "python -m bench.pretrained " + " ".join(argv if argv is not None else sys.argv[1:])
    load = f"{load_start:.1f} and {os.getloadavg()[0]:.1f}"
    (out / "pretrained.md").write_text(summary(impl_rows, graph_rows, machine_name(), command.strip(), load))
    print((out / "pretrained.md").read_text())
    bad = disagreements(impl_rows + graph_rows, args.tol)
    if bad:
        print(f"error: {len(bad)} configuration(s) disagree beyond --tol {args.tol}: {bad[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
