"""Structural positional encodings: computed from a sentence's graph, per sentence (``ndata['pe']``).

``model.positional=lap_pe | random_walk_pe`` with ``model.pe_dim`` columns, on the graph ``model.pe_graph``
names: ``tree`` (the sentence's tree over its tokens), ``chain`` (i - 1 -- i) or ``graph`` (the construction's
own edges). The assembler (``construction.py``) calls :func:`positions`.
"""

from __future__ import annotations

import dgl
import torch

from data.graphs.edges import tree_edges

STRUCTURAL_PE = ("lap_pe", "random_walk_pe")  # positional encodings computed from a graph, per sentence
PE_GRAPHS = ("tree", "chain", "graph")  # which graph they are computed on


def _undirected_simple(src: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    """The (n, n) 0/1 adjacency of the undirected graph behind ``src -> dst``, without self loops."""
    a = torch.zeros(n, n, dtype=torch.float64)
    a[dst, src] = 1.0
    a = ((a + a.T) > 0).double()
    a.fill_diagonal_(0.0)
    return a


def sign_of_peak(vecs: torch.Tensor, rel_tol: float = 1e-4) -> torch.Tensor:
    """(k,) +-1 per column: the sign of the column's largest entry by magnitude, where a tie (entries within
    ``rel_tol`` of the largest |entry|, as when a vector is +-1/sqrt(2) on two leaves) goes to the first
    such row. Exact ties broken by rounding would pick different rows in float64 and float32."""
    mag = vecs.abs()
    near = mag >= mag.max(0).values * (1 - rel_tol)
    first = near.float().argmax(0)  # argmax of a 0/1 column is its first 1
    peak = vecs[first, torch.arange(vecs.shape[1])]
    return torch.where(peak < 0, -1.0, 1.0)


def canonical_eigenspaces(vals: torch.Tensor, vecs: torch.Tensor, rel_tol: float = 1e-8) -> torch.Tensor:
    """``vecs`` (n, n, ascending ``vals``) with every repeated eigenspace given a basis that does not depend on
    the eigensolver: the projector onto the space (``Q Q^T``, the same whatever basis ``Q`` the solver chose)
    applied to e_1, e_2, ... in node order, orthonormalised (Gram-Schmidt), keeping the first independent ones.
    LAPACK builds pick different bases for one space (an Intel CPU's MKL and an AMD CPU's, for a star's
    leaves), so without this a tree's positions depended on the machine. Single eigenvalues are kept as
    they are (their sign is set by :func:`sign_of_peak`)."""
    out, i, n = vecs.clone(), 0, len(vals)
    while i < n:
        j = i + 1
        while j < n and vals[j] - vals[i] <= rel_tol * max(1.0, abs(float(vals[i]))):
            j += 1
        if j - i > 1:
            q = vecs[:, i:j]
            proj = q @ q.T
            basis: list[torch.Tensor] = []
            for col in proj.T:  # the projection of e_1, e_2, ...
                for b in basis:
                    col = col - (b @ col) * b
                norm = col.norm()
                if norm > 1e-6:
                    basis.append(col / norm)
                if len(basis) == j - i:
                    break
            out[:, i:j] = torch.stack(basis, 1)
        i = j
    return out


def laplacian_pe(src: torch.Tensor, dst: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """(n, k) Laplacian eigenvector positions (Dwivedi et al., 2020): the eigenvectors of
    ``L = I - D^-1/2 A D^-1/2`` with the k smallest non-trivial eigenvalues, zero-padded when n - 1 < k.

    The same quantity as ``dgl.lap_pe(g, k, padding=True)`` (tests/models/test_positional.py compares them), computed
    with a dense symmetric eigensolver: exact and deterministic for sentence-sized graphs, where
    ``dgl.lap_pe`` uses ARPACK with tolerance 1e-2 and a random start. An eigenvector's sign is
    arbitrary; the one here makes its largest entry positive, and the model flips signs at random while
    training (``models/encoder.py``) so it cannot rely on either.
    On the path graph (``pe_graph=chain``) eigenvector k is ``sqrt(deg(i)) · cos(π k i / (n - 1))``:
    cosines of the position, like the sinusoidal encoding, but with frequencies that grow linearly
    in k and depend on the sentence length (tutorials/03_graphs_for_sentences.py derives it).
    On trees, eigenvalues repeat (leaves of one operator share eigenvalue 1); any basis of a repeated
    eigenspace is as good as another, so the one here is fixed by node order
    (:func:`canonical_eigenspaces`), the same on every machine, not the eigensolver's.
    """
    a = _undirected_simple(src, dst, n)
    d = a.sum(1).clamp(min=1).pow(-0.5)
    lap = torch.eye(n, dtype=torch.float64) - d[:, None] * a * d[None, :]
    vals, vecs = torch.linalg.eigh(lap)  # ascending eigenvalues
    vecs = canonical_eigenspaces(vals, vecs)[:, 1 : k + 1]  # drop the trivial eigenvector
    vecs = vecs * sign_of_peak(vecs).double()
    out = torch.zeros(n, k, dtype=torch.float32)
    out[:, : vecs.shape[1]] = vecs.float()
    return out


def random_walk_pe(src: torch.Tensor, dst: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """(n, k) random-walk positions (Dwivedi et al., 2022): the probability that a random walk on the
    undirected graph returns to its start after 1..k steps, by ``dgl.random_walk_pe``."""
    a = _undirected_simple(src, dst, n)
    s, d = a.nonzero(as_tuple=True)
    return dgl.random_walk_pe(dgl.graph((s, d), num_nodes=n), k).float()


def positions(
    pe: str, pe_dim: int, pe_graph: str, n: int, heads: list[int] | None, src: torch.Tensor, dst: torch.Tensor
) -> torch.Tensor:
    """The structural positional encoding ``pe`` (n, pe_dim) of one sentence on the graph ``pe_graph`` names
    (``src -> dst``: the construction's own edges, for ``graph``)."""
    if pe_graph == "tree":
        if heads is None:
            raise ValueError(f"model.positional={pe} on the tree needs a tree; set model.pe_graph=chain")
        src, dst = tree_edges(heads, self_loops=False)
    elif pe_graph == "chain":
        src, dst = torch.arange(n - 1), torch.arange(1, n)
    compute = laplacian_pe if pe == "lap_pe" else random_walk_pe
    return compute(src, dst, n, pe_dim)
