"""Every aggregator, bit for bit, against outputs saved before ``models/aggregators`` became a package.

tests/fixtures/aggregators_golden.pt holds, for a fixed seeded input, what commit 9f2f680 (the last
``models/aggregators.py``) computed: for each aggregator, edge types off and on, sparse (DGL) and
dense (padded), on a batch of irregular graphs and on a batch of complete ones, with each hook on its
own and all together (head mask, recorded attention, the structural bias ``models/minilm.py`` adds,
attention dropout in training mode), its seeded initial parameters (names in registration order: the
optimiser's state in a checkpoint is stored by that order), output, recorded weights and gradients
with respect to the input and to every parameter. Also ``Block`` (pre-LN with a GRU update, post-LN)
and MiniLM's ``PostLNBlock`` with a bias.

The fixture was written on a CPU whose float32 kernels (MKL, ATen's vectorised softmax) round as they
do there; an Intel AVX-512 machine's round 108 of its 1,480 tensors differently in the last bits (seen
2026-11-26: at most 7.5e-8 absolute, each within rtol 1e-5 and atol 1e-6), and no environment variable
(``MKL_CBWR``, ``ATEN_CPU_CAPABILITY``, ``DNNL_MAX_CPU_ISA``) takes them back. So every tensor must equal
the fixture within rtol 1e-5, atol 1e-6 (CPU float32 with one thread): rounding may differ between
machines, any change to the arithmetic (a moved 1 / sqrt(d_h), swapped queries and keys) may not, and
the failure says how many tensors were bit-identical. Regenerate the file only at a commit whose numerics
are known good:
``.venv/bin/python -m tests.models.test_aggregator_golden --write``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dgl
import pytest
import torch

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "aggregators_golden.pt"
DIM, HEADS, TYPES = 12, 2, 6  # d_h = 6: 1 / sqrt(d_h) is not a power of two; TYPES: len(data.graphs.EDGE_TYPES)
NAMES = ("gcn", "gin", "gat", "transformer", "sum", "mean", "max")
ATTENTION = ("gat", "transformer")
HOOKS = ("plain", "head_mask", "record", "bias", "dropout", "all")
RTOL, ATOL = 1e-5, 1e-6  # float32 rounding of another CPU's kernels; a change to the arithmetic is far above it


def irregular_batch() -> dgl.DGLGraph:
    """Three graphs: 5 nodes with random edges (node 4 receives nothing), 3 nodes complete with self
    loops, and 1 node with a self loop; every edge has a random type in [0, TYPES)."""
    gen = torch.Generator().manual_seed(11)
    src = torch.tensor([0, 1, 2, 3, 4, 4, 0, 2, 1, 3, 0])
    dst = torch.tensor([0, 0, 1, 1, 2, 3, 3, 3, 2, 0, 1])
    g1 = dgl.graph((src, dst), num_nodes=5)
    pairs = torch.cartesian_prod(torch.arange(3), torch.arange(3))
    g2 = dgl.graph((pairs[:, 0], pairs[:, 1]), num_nodes=3)
    g3 = dgl.graph((torch.tensor([0]), torch.tensor([0])), num_nodes=1)
    g = dgl.batch([g1, g2, g3])
    g.edata["etype"] = torch.randint(0, TYPES, (g.num_edges(),), generator=gen)
    g.ndata["pos"] = torch.cat([torch.arange(int(n)) for n in g.batch_num_nodes()])
    return g


def complete_batch() -> dgl.DGLGraph:
    """Two complete graphs of 4 nodes with self loops (no padding: the dense path needs no mask);
    types by position, as ``models.dense.to_dense`` builds them for a complete graph."""
    from data.graphs import positional_edge_types

    pairs = torch.cartesian_prod(torch.arange(4), torch.arange(4))
    g = dgl.batch([dgl.graph((pairs[:, 0], pairs[:, 1]), num_nodes=4) for _ in range(2)])
    g.ndata["pos"] = torch.cat([torch.arange(4), torch.arange(4)])
    src, dst = g.edges()
    pos = g.ndata["pos"].view(2, 4)
    g.edata["etype"] = positional_edge_types(pos)[dst // 4, dst % 4, src % 4]
    return g


def dense_twin(g: dgl.DGLGraph, complete: bool, typed: bool):
    from models.dense import to_dense

    dg = to_dense(g, "cpu", complete=complete, edge_types=typed)
    return dg


def make(name: str, typed: bool, attn_dropout: float = 0.0, scaled: bool = True) -> torch.nn.Module:
    from models.aggregators import AGGREGATORS

    extra = {"scaled": scaled} if name == "transformer" else {}
    torch.manual_seed(0)
    return AGGREGATORS[name](DIM, num_heads=HEADS, attn_dropout=attn_dropout, edge_types=TYPES if typed else 0, **extra)


def run_case(module, g, dg, impl: str, hook: str, block: bool = False) -> dict:
    """Output, recorded weights and gradients of ``module`` on a seeded input, with ``hook`` on."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(g.num_nodes(), DIM, generator=gen).requires_grad_()
    weights = torch.randn(g.num_nodes(), DIM, generator=gen)
    b, n = dg.shape
    bias = None
    if hook in ("bias", "all"):  # "all": every hook; "all_but_bias": every hook but the bias (GAT takes none)
        bias = torch.randn(b, HEADS, n, n, generator=gen) if impl == "dense" else torch.randn(g.num_edges(), HEADS)
    if hook in ("head_mask", "all", "all_but_bias"):
        module.head_mask = torch.tensor([1.0, 0.0])
    if hook in ("record", "all", "all_but_bias"):
        module.record_attention = True
    module.train(hook == "dropout")
    torch.manual_seed(7)  # the dropout masks
    inputs = dg.pad(x) if impl == "dense" else x
    args = () if bias is None else (bias,)
    if block:  # a block takes the graph (or its dense twin) first, whichever impl
        out = module(dg if impl == "dense" else g, inputs, *args)
    elif impl == "dense":
        out = module.forward_dense(inputs, dg, *args)
    else:
        out = module(g, inputs, *args)
    flat = dg.unpad(out) if impl == "dense" else out
    (flat * weights).sum().backward()
    result = {"out": flat.detach(), "grad_x": x.grad}
    result.update({f"grad.{k}": p.grad for k, p in module.named_parameters() if p.grad is not None})
    if hook in ("record", "all", "all_but_bias"):
        result["attention"] = getattr(module, "last_attention", None)
    return result


def init_of(module) -> dict:
    return {f"init.{k}": v.detach().clone() for k, v in module.named_parameters()}


def compute() -> dict:
    """Every case: key -> {name: tensor}; "order" keys hold the parameter names in registration order."""
    from models.encoder import Block
    from models.minilm import PostLNBlock

    cases: dict = {}
    graphs = {"irregular": (irregular_batch(), False), "complete": (complete_batch(), True)}
    for name in NAMES:
        for typed in (False, True):
            for graph, (g, complete) in graphs.items():
                for impl in ("sparse", "dense"):
                    dg = dense_twin(g, complete, typed)
                    for hook in HOOKS if name in ATTENTION else ("plain",):
                        if hook == "bias" and name != "transformer":
                            continue
                        if hook == "all" and name != "transformer":
                            hook = "all_but_bias"
                        dropout = 0.2 if hook == "dropout" else 0.0
                        module = make(name, typed, dropout)
                        key = f"{name}/{'typed' if typed else 'untyped'}/{graph}/{impl}/{hook}"
                        cases[f"init/{name}/{typed}/{dropout}"] = init_of(module)
                        cases[key] = run_case(module, g, dg, impl, hook)
                        cases[f"order/{name}/{typed}"] = [k for k, _ in module.named_parameters()]
    g, _ = graphs["irregular"]
    for impl in ("sparse", "dense"):
        dg = dense_twin(g, False, False)
        module = make("transformer", False, scaled=False)
        cases[f"transformer_unscaled/{impl}"] = init_of(module) | run_case(module, g, dg, impl, "plain")
        for norm, update in (("pre", "gru"), ("post", "residual")):
            for name in ("gcn", "transformer"):
                torch.manual_seed(1)
                block = Block(make(name, False), DIM, True, 2, 0.0, norm, update)
                case = init_of(block) | run_case(block, g, dg, impl, "plain", block=True)
                cases[f"block/{name}/{norm}/{update}/{impl}"] = case
        torch.manual_seed(2)
        post = PostLNBlock(DIM, HEADS, 16, 1e-12, 0.0, 0.0)
        case = init_of(post) | run_case(post, g, dg, impl, "bias", block=True)
        cases[f"minilm_block/{impl}"] = case
        cases["order/minilm_block"] = [k for k, _ in post.named_parameters()]
    return cases


def _single_thread(fn):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def computed() -> dict:
    return _single_thread(compute)


@pytest.fixture(scope="module")
def saved() -> dict:
    return torch.load(FIXTURE, weights_only=True)


def test_every_case_is_saved_and_computed(computed, saved):
    assert set(computed) == set(saved)
    assert len([k for k in saved if not k.startswith("order/")]) > 150


def test_parameter_names_and_their_order_are_unchanged(computed, saved):
    """state_dict keys (old checkpoints load) and registration order (their optimiser state maps back)."""
    for key in (k for k in saved if k.startswith("order/")):
        assert computed[key] == saved[key], key


def test_outputs_weights_and_gradients_are_unchanged(computed, saved):
    differ, exact, total = [], 0, 0
    for key, want in saved.items():
        if key.startswith("order/"):
            continue
        got = computed[key]
        assert set(got) == set(want), key
        for name, tensor in want.items():
            if tensor is None or got[name] is None:
                same = tensor is None and got[name] is None
            else:
                total += 1
                exact += torch.equal(got[name], tensor)
                same = got[name].shape == tensor.shape and torch.allclose(got[name], tensor, rtol=RTOL, atol=ATOL)
            if not same:
                differ.append(f"{key}:{name}")
    assert not differ, (
        f"{len(differ)} tensors moved beyond rounding ({exact} of {total} bit-identical), first: {differ[:8]}"
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.models.test_aggregator_golden --write  (at a commit with known-good numerics)")
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    torch.save(_single_thread(compute), FIXTURE)
    print(f"wrote {FIXTURE}")
