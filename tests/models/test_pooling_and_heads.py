"""Attention-free aggregation (sum, mean, max) against loops by hand; head masks and the unscaled dot product."""

import dgl
import pytest
import torch
import torch.nn.functional as F

from data.graphs import complete_edges, tree_edges
from models.aggregators import AGGREGATORS, DotProductAttention, PoolAggregation
from models.dense import to_dense


# --------------------------------------------------------------------------------------------
# Attention-free aggregation: sum, mean, max of the neighbours, by hand
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_pool_aggregation_matches_a_loop_over_neighbours(reduce):
    torch.manual_seed(0)
    heads = [-1, 0, 0, 2, 2, 2, 0]
    src, dst = tree_edges(heads, self_loops=False)
    g = dgl.graph((src, dst), num_nodes=len(heads) + 1)  # node 7: no incoming edge
    agg = PoolAggregation(8, reduce=reduce)
    h = torch.randn(g.num_nodes(), 8)
    out = agg(g, h)
    for i in range(g.num_nodes()):
        nbrs = src[dst == i]
        if len(nbrs) == 0:
            expected = agg.linear(torch.zeros(8))
        else:
            m = {"sum": h[nbrs].sum(0), "mean": h[nbrs].mean(0), "max": h[nbrs].max(0).values}[reduce]
            expected = agg.linear(m)
        torch.testing.assert_close(out[i], expected, atol=1e-6, rtol=1e-5)
    dense = agg.forward_dense(h[None], to_dense(g, "cpu"))[0]
    torch.testing.assert_close(dense, out, atol=1e-5, rtol=1e-5)


def test_max_on_complete_graphs_shares_one_maximum_per_graph_with_the_same_gradients():
    """The complete-graph shortcut (one max per graph, O(B n d)) against the (B, n, n, d) masked max,
    values and gradients, with tied maxima (repeated tokens) and padding."""
    torch.manual_seed(0)
    agg = PoolAggregation(6, reduce="max")
    g = dgl.batch([dgl.graph(complete_edges(n, self_loops=True), num_nodes=n) for n in (5, 3, 1)])
    base = torch.randn(g.num_nodes(), 6)
    base[0, 0] = 10.0  # node 0 holds graph 0's maximum of channel 0 ...
    base[1], base[2] = base[0], base[0]  # ... tied with nodes 1 and 2: amax splits their gradient evenly
    grads = []
    for complete in (True, False):
        dg = to_dense(g, "cpu", complete=complete)
        assert (dg.adj is None) == complete
        h = dg.pad(base).requires_grad_()
        weight = torch.linspace(-1, 1, h.numel()).view_as(h)
        out = agg.forward_dense(h, dg)
        (out * weight).sum().backward()
        grads.append((out.detach(), h.grad))
    (fast, fast_grad), (full, full_grad) = grads
    torch.testing.assert_close(fast, full, atol=1e-6, rtol=0)
    torch.testing.assert_close(fast_grad, full_grad, atol=1e-6, rtol=0)
    assert fast_grad[0, 0].abs().sum() > 0 and torch.equal(fast_grad[0, 0], fast_grad[0, 1])


def test_sum_sees_multiplicity_mean_and_max_do_not():
    """GIN's point (Xu et al., 2019): a node with neighbours {a, a} and one with {a} differ under sum only."""
    g = dgl.graph(([1, 2, 4], [0, 0, 3]), num_nodes=5)  # node 0 hears 1 and 2, node 3 hears 4
    h = torch.ones(5, 4)
    outs = {r: PoolAggregation(4, reduce=r)(g, h) for r in ("sum", "mean", "max")}
    for r, out in outs.items():
        agg_same = torch.allclose(out[0], out[3])
        assert agg_same == (r != "sum"), r


def test_unknown_reduction_is_a_clear_error():
    with pytest.raises(ValueError, match="valid: sum, mean, max"):
        PoolAggregation(4, reduce="median")


# --------------------------------------------------------------------------------------------
# Head masks and the unscaled dot product
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gat", "transformer"])
def test_masking_a_head_removes_exactly_its_contribution(name):
    torch.manual_seed(0)
    agg = AGGREGATORS[name](16, num_heads=4).eval()
    g = dgl.graph(complete_edges(6))
    h = torch.randn(6, 16)
    full = agg(g, h)
    agg.head_mask = torch.ones(4)
    torch.testing.assert_close(agg(g, h), full)  # all ones: no change
    agg.head_mask = torch.tensor([1.0, 0.0, 1.0, 1.0])
    masked = agg(g, h)
    # by hand: the output projection of the concatenated heads, head 2's slice zeroed
    agg.head_mask, agg.record_attention = None, True
    agg(g, h)
    a = agg.last_attention  # (E, H)
    if name == "transformer":
        values = agg.value(h).view(6, 4, 4)
    else:
        values = agg.proj(h).view(6, 4, 4)
    src, dst = g.edges()
    heads = torch.zeros(6, 4, 4).index_add_(0, dst, a[:, :, None] * values[src])
    heads[:, 1] = 0
    torch.testing.assert_close(masked, agg.out(heads.flatten(1)), atol=1e-5, rtol=1e-5)
    agg.record_attention, agg.head_mask = False, torch.tensor([1.0, 0.0, 1.0, 1.0])
    dense = agg.forward_dense(h[None], to_dense(g, "cpu", complete=True))[0]  # the fused SDPA path
    torch.testing.assert_close(dense, masked, atol=1e-5, rtol=1e-5)
    agg.head_mask = torch.zeros(4)
    torch.testing.assert_close(agg(g, h), agg.out.bias.expand(6, -1))  # no head: only O's bias


def test_unscaled_dot_product_is_sdpa_with_scale_one():
    torch.manual_seed(0)
    agg = DotProductAttention(16, num_heads=2, scaled=False).eval()
    h = torch.randn(5, 16)
    out = agg(dgl.graph(complete_edges(5)), h)
    q, k, v = (m(h).view(5, 2, 8).transpose(0, 1) for m in (agg.query, agg.key, agg.value))
    ref = agg.out(F.scaled_dot_product_attention(q, k, v, scale=1.0).transpose(0, 1).flatten(1))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    scaled = DotProductAttention(16, num_heads=2, scaled=True).eval()
    scaled.load_state_dict(agg.state_dict())
    assert (scaled(dgl.graph(complete_edges(5)), h) - out).abs().max() > 1e-3  # the flag does something
