"""Structural positional encodings: Laplacian eigenvectors and random-walk returns, on every pe_graph, in both impls."""

import dgl
import numpy as np
import pytest
import torch

from data.graphs import GraphConstruction, laplacian_pe, random_walk_pe, tree_edges
from tests.helpers.batches import listops_batch
from tests.helpers.encoders import graph_encoder


# --------------------------------------------------------------------------------------------
# Structural positional encodings
# --------------------------------------------------------------------------------------------
def test_laplacian_pe_spans_the_same_eigenvectors_as_dgl():
    n, k = 9, 4  # a path: distinct eigenvalues, so each eigenvector is unique up to sign
    src, dst = torch.arange(n - 1), torch.arange(1, n)
    ours = laplacian_pe(src, dst, n, k)
    g = dgl.graph((torch.cat([src, dst]), torch.cat([dst, src])), num_nodes=n)
    theirs = dgl.lap_pe(g, k, padding=True)
    for j in range(k):
        cos = torch.dot(ours[:, j], theirs[:, j]) / (ours[:, j].norm() * theirs[:, j].norm())
        assert abs(cos.item()) > 0.99, (j, cos)
    # and each is a true eigenvector of the normalised Laplacian: L v = lambda v
    deg = torch.zeros(n).index_add_(0, src, torch.ones(n - 1)).index_add_(0, dst, torch.ones(n - 1))
    a = torch.zeros(n, n)
    a[src, dst] = a[dst, src] = 1
    lap = torch.eye(n) - a / (deg[:, None] * deg[None, :]).sqrt()
    lv = lap @ ours
    lam = (lv * ours).sum(0)
    torch.testing.assert_close(lv, ours * lam, atol=1e-5, rtol=1e-4)
    assert (lam[1:] > lam[:-1]).all()  # the smallest non-trivial ones, in order


def test_laplacian_pe_is_deterministic_padded_and_sign_fixed():
    heads = [-1, 0, 1, 1, 0]
    src, dst = tree_edges(heads, self_loops=False)
    pe = laplacian_pe(src, dst, 5, 8)
    assert pe.shape == (5, 8) and (pe[:, 4:] == 0).all()  # only n - 1 = 4 non-trivial eigenvectors
    torch.testing.assert_close(pe, laplacian_pe(src, dst, 5, 8))
    mag = pe[:, :4].abs()
    first = (mag >= mag.max(0).values * (1 - 1e-4)).float().argmax(0)  # the first row of a tied peak
    assert (pe[first, torch.arange(4)] > 0).all()
    assert torch.isclose(pe[:, 1].abs().max(), torch.tensor(0.5**0.5))  # this tree has a tied +-1/sqrt(2) vector


def test_random_walk_pe_return_probabilities():
    src, dst = torch.tensor([0, 0]), torch.tensor([1, 2])  # a star: 0 in the middle
    pe = random_walk_pe(src, dst, 3, 3)
    torch.testing.assert_close(pe[:, 0], torch.zeros(3))  # no self loops: no 1-step return
    torch.testing.assert_close(pe[:, 1], torch.tensor([1.0, 0.5, 0.5]))  # the hub always back; a leaf half the time
    torch.testing.assert_close(pe[:, 2], torch.zeros(3))  # bipartite: never after an odd number


def normalized_laplacian_eigs(adj: np.ndarray):
    """numpy's eigendecomposition of ``I - D^-1/2 A D^-1/2``, ascending: the reference laplacian_pe must match."""
    d = adj.sum(1) ** -0.5
    return np.linalg.eigh(np.eye(len(adj)) - d[:, None] * adj * d[None, :])


def random_walk_returns(adj: np.ndarray, k: int) -> np.ndarray:
    """(n, k) the diagonal of P, P^2, ..., P^k for the random walk P = D^-1 A, by numpy."""
    step = adj / adj.sum(1, keepdims=True)
    power, out = np.eye(len(adj)), []
    for _ in range(k):
        power = power @ step
        out.append(np.diag(power))
    return np.stack(out, 1)


@pytest.mark.parametrize("pe", ["lap_pe", "random_walk_pe"])
@pytest.mark.parametrize("pe_graph", ["tree", "chain", "graph"])
def test_constructions_carry_the_encoding(pe, pe_graph):
    """The construction's ndata['pe'] is the encoding of the graph pe_graph names, checked against numpy on
    adjacency matrices written out here (not against data.graphs' own functions)."""
    heads = [-1, 0, 0, 0, 1]  # 0 heads 1, 2, 3; 1 heads 4
    con = GraphConstruction(name="window", window=2, pe=pe, pe_dim=3, pe_graph=pe_graph, cls_id=2)
    g = con([5, 6, 7, 8, 9], heads)
    assert g.ndata["pe"].shape == (6, 3)
    assert (g.ndata["pe"][-1] == 0).all()  # <cls>
    pairs = {
        "tree": [(0, 1), (0, 2), (0, 3), (1, 4)],
        "chain": [(i, i + 1) for i in range(4)],
        "graph": [(i, j) for i in range(5) for j in range(i + 1, 5) if j - i <= 2],  # window=2, <cls> left out
    }[pe_graph]
    adj = np.zeros((5, 5))
    for i, j in pairs:
        adj[i, j] = adj[j, i] = 1.0
    ours = g.ndata["pe"][:5].double().numpy()
    if pe == "random_walk_pe":
        np.testing.assert_allclose(ours, random_walk_returns(adj, 3), atol=1e-6)
        return
    values, vectors = normalized_laplacian_eigs(adj)
    assert abs(values[0]) < 1e-9 and (np.diff(values[:5]) > 1e-3).all()  # connected; each eigenvector unique up to sign
    for j in range(3):  # the 3 smallest non-trivial eigenvalues' eigenvectors, each up to its sign
        ref = vectors[:, j + 1]
        sign = np.sign(ref @ ours[:, j])
        np.testing.assert_allclose(ours[:, j], sign * ref, atol=1e-5, err_msg=f"eigenvector {j + 1}")


def test_positional_encoding_errors_name_the_fix():
    with pytest.raises(ValueError, match="pe_graph=chain"):
        GraphConstruction(name="complete", pe="lap_pe")([1, 2, 3], None)
    for graph in ("knn", "none"):
        with pytest.raises(ValueError, match="use model.pe_graph=tree or chain"):
            GraphConstruction(name=graph, pe="lap_pe", pe_graph="graph")
    with pytest.raises(ValueError, match="valid: tree, chain, graph"):
        GraphConstruction(name="tree", pe="lap_pe", pe_graph="parse")
    model = graph_encoder(20, 10, positional="lap_pe", construction=GraphConstruction(name="complete"))
    g, _ = listops_batch(GraphConstruction(name="complete"))
    with pytest.raises(ValueError, match="needs graphs built with it"):
        model(g)


@pytest.mark.parametrize("positional", ["lap_pe", "random_walk_pe"])
def test_structural_encodings_reach_the_model_in_both_impls(positional):
    torch.manual_seed(0)
    con = GraphConstruction(name="complete", pe=positional, pe_dim=6)
    g, _ = listops_batch(con)
    model = graph_encoder(30, 10, positional=positional, pe_dim=6, construction=con).eval()
    sparse = model(g)
    model.impl = "dense"
    torch.testing.assert_close(model(g), sparse, atol=1e-5, rtol=1e-4)
    g.ndata["pe"] = torch.zeros_like(g.ndata["pe"])
    assert (model(g) - sparse).abs().max() > 1e-4  # the encoding changes the output
    if positional == "lap_pe":  # training flips eigenvector signs at random; evaluation never does
        g, _ = listops_batch(con)
        model.train()
        model.embed_dropout.p = 0.0
        for block in model.blocks:
            block.dropout.p = 0.0
        assert not torch.allclose(model(g), model(g))
        model.eval()
        torch.testing.assert_close(model(g), model(g))


def test_a_repeated_eigenspace_gets_the_same_basis_whatever_basis_the_solver_returns():
    """A star's leaves share one eigenvalue: LAPACK builds (Intel's MKL, AMD's path) return different bases of
    that space, which made lap_pe depend on the machine. canonical_eigenspaces gives every rotation of the
    solver's basis the same columns, still orthonormal eigenvectors; single eigenvalues keep theirs."""
    from data.graphs.positional import canonical_eigenspaces

    n = 5  # node 0 joined to 4 leaves
    a = torch.zeros(n, n, dtype=torch.float64)
    a[0, 1:] = a[1:, 0] = 1
    d = a.sum(1).pow(-0.5)
    lap = torch.eye(n, dtype=torch.float64) - d[:, None] * a * d[None, :]
    vals, vecs = torch.linalg.eigh(lap)
    repeated = (vals - 1).abs() < 1e-9
    assert repeated.sum() == 3  # eigenvalue 1, three times
    gen = torch.Generator().manual_seed(0)
    rotation, _ = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64, generator=gen))
    rotated = vecs.clone()
    rotated[:, repeated] = vecs[:, repeated] @ rotation  # another basis of the same space, as another solver gives
    assert not torch.allclose(rotated, vecs)
    mine, theirs = canonical_eigenspaces(vals, vecs), canonical_eigenspaces(vals, rotated)
    torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-12)
    torch.testing.assert_close(lap @ mine, mine * vals, rtol=0, atol=1e-12)  # still eigenvectors
    torch.testing.assert_close(mine.T @ mine, torch.eye(n, dtype=torch.float64), rtol=0, atol=1e-12)
    assert torch.equal(mine[:, ~repeated], vecs[:, ~repeated])
