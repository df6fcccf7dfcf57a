"""Message passing in stock torch (models/torch_mp.py) is DGL's attention and masked SDPA, forward and backward.

On several graphs (complete, window, tree, bpt, and one where a node receives nothing), in batches of mixed
lengths: ``mp_attention`` equals DGL's ``u_dot_v -> edge_softmax -> u_mul_e`` (the repo's
``DotProductAttention.forward``) and ``scaled_dot_product_attention`` masked by the adjacency (its
``forward_dense``) within 1e-5, outputs and gradients of the input and of every parameter.
"""

import dgl
import pytest
import torch
import torch.nn.functional as F

from data.graphs import GraphConstruction
from models.aggregators import DotProductAttention
from models.dense import to_dense
from models.torch_mp import mp_attention, segment_softmax

LENGTHS = (5, 9, 1, 13)


def random_heads(n: int, gen: torch.Generator) -> list[int]:
    return [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]


def built(name: str) -> dgl.DGLGraph:
    gen = torch.Generator().manual_seed(1)
    construction = GraphConstruction(name=name, window=2)
    return dgl.batch([construction([3] * n, random_heads(n, gen)) for n in LENGTHS])


def receives_nothing() -> dgl.DGLGraph:
    """A chain 0 -> 1 -> 2 -> 3 with no self loops: node 0 has no incoming edge; and a lone node."""
    return dgl.batch([dgl.graph(([0, 1, 2], [1, 2, 3]), num_nodes=4), dgl.graph(([], []), num_nodes=1)])


GRAPHS = {name: (lambda name=name: built(name)) for name in ("complete", "window", "tree", "bpt")}
GRAPHS["no_incoming"] = receives_nothing


def mp_forward(agg: DotProductAttention, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
    """The repo's aggregator with its DGL message passing replaced by stock-torch message passing."""
    shape = (-1, agg.num_heads, agg.head_dim)
    q, k, v = agg.query(h).view(shape), agg.key(h).view(shape), agg.value(h).view(shape)
    src, dst = g.edges()
    return agg.out(mp_attention(q, k, v, src, dst, scale=agg.scale).flatten(1))


def dgl_forward(agg, g, h):
    return agg(g, h)


def sdpa_forward(agg, g, h):
    dg = to_dense(g, h.device)
    return dg.unpad(agg.forward_dense(dg.pad(h), dg))


def run(forward, agg, g, h0):
    agg.zero_grad()
    h = h0.clone().requires_grad_()
    out = forward(agg, g, h)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    return out.detach(), h.grad, {n: p.grad.clone() for n, p in agg.named_parameters()}


@pytest.mark.parametrize("graph", sorted(GRAPHS))
def test_equals_dgl_and_masked_sdpa(graph):
    g = GRAPHS[graph]()
    torch.manual_seed(0)
    agg = DotProductAttention(32, num_heads=4).eval()
    h = torch.randn(g.num_nodes(), 32)
    mine = run(mp_forward, agg, g, h)
    for reference in (dgl_forward, sdpa_forward):
        theirs = run(reference, agg, g, h)
        torch.testing.assert_close(mine[0], theirs[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(mine[1], theirs[1], atol=1e-5, rtol=0)
        for name, grad in mine[2].items():
            torch.testing.assert_close(grad, theirs[2][name], atol=1e-5, rtol=0, msg=f"{reference.__name__}: {name}")


def test_node_with_no_incoming_edge_gets_zero():
    g = receives_nothing()
    q, k, v = (torch.randn(g.num_nodes(), 2, 4) for _ in range(3))
    out = mp_attention(q, k, v, *g.edges())
    assert out[0].abs().sum() == 0 and out[4].abs().sum() == 0  # node 0 of the chain, the lone node
    torch.testing.assert_close(out[1], v[0])  # one sender: all its weight


def test_segment_softmax_is_dgl_edge_softmax_and_sdpa_on_raw_tensors():
    g = built("bpt")
    src, dst = g.edges()
    scores = torch.randn(g.num_edges(), 3, dtype=torch.float64) * 20  # large: the maximum shift matters
    torch.testing.assert_close(segment_softmax(scores, dst, g.num_nodes()), dgl.ops.edge_softmax(g, scores))
    # raw attention on one complete graph == plain SDPA
    n = 7
    q, k, v = (torch.randn(1, 2, n, 8, dtype=torch.float64) for _ in range(3))
    s, d = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")

    def flat(x):  # (1, H, n, d) -> (n, H, d)
        return x[0].transpose(0, 1)

    out = mp_attention(flat(q), flat(k), flat(v), s.flatten(), d.flatten())
    torch.testing.assert_close(out, flat(F.scaled_dot_product_attention(q, k, v)))
