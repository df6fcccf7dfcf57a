"""How a sentence becomes a graph.

A sentence of n tokens is a graph of n nodes; the construction decides who talks to whom.
Edges are directed: an edge ``src -> dst`` means "dst receives a message from src". Every
function here returns the edge list ``(src, dst)`` of one sentence, so the constructions are
short, testable and can be read next to each other:

  complete   every token receives from every token: what a Transformer layer does.
  tree       the dataset's own tree, both ways along every edge: a Tree-LSTM-like inductive bias.
             ListOps: the expression's tree (operator heads, arguments below). SST: the gold
             constituency tree, with a *phrase* node (``pos = -1``, token ``<phrase>``) for every
             inner node, so ``readout=root`` reads the root phrase. A dataset with no gold tree
             (TREC, SST-2, your files) uses its dependency parse, as ``dep`` does.
  dep        the dependency parse (spaCy's ``en_core_web_sm``): each word joined to its head word.
             Text datasets only; the same tokens as every other construction.
  binary_tree  the tree binarised (SST's gold trees are binary already and are used as they are):
             each head takes its dependents one at a time, left to right,
             through new *phrase* nodes (``[MAX 2 9 ]`` -> ``( ( ( [MAX 2 ) 9 ) ] )``, exactly the
             parentheses of the published ListOps files). Tokens are the leaves; phrase nodes
             (``pos = -1``) are joined to their two children, both ways. The tree the binary
             Tree-LSTM of Tai et al. (2015) reads.
  window     every token receives from the tokens at most ``window`` positions away: a
             convolution / local attention.
  bpt        the binary-partition graph of BP-Transformer (Ye et al., 2019): a *span* node (``pos = -1``,
             token ``<phrase>``) for every block of a binary partition of the tokens, each span
             hearing its tokens, each token hearing its ``k`` nearest tokens and then ``k`` ever larger
             spans per level on each side: O(k·n·log n) edges instead of n^2 (``bpt_edges``).
  knn        every token receives from its ``k`` nearest tokens in the model's current
             embedding space: a graph the model learns, rebuilt in the forward pass
             (``dgl.segmented_knn_graph``, no gradient through the choice of edges).
  none       every token hears only itself: a bag of tokens, the baseline with no interaction.

``self_loops`` adds ``i -> i`` so a node keeps its own state in the aggregation (the
Transformer's query attends to its own key). A ``<cls>`` virtual node, when the readout asks
for one, is appended as the last node and exchanges messages with every token.

Every edge carries a type in ``edata['etype']``, so a message can know where it comes from
(``model.edge_types``): from the node itself, from a child (up the tree), from the head (down the
tree), from a token to the left or to the right (every edge that is not a tree edge), or to/from
the ``<cls>`` node. Tree constructions also store, per node, ``ndata['parent']`` (-1 at a root),
``ndata['slot']`` (its index among its parent's children) and ``ndata['height']`` (0 at a leaf,
1 + the tallest child otherwise): the schedule of the recursive models (``models/recursive.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import dgl
import torch

from data.vocab import PHRASE, SPECIALS

# Edge types (edata['etype']): what the receiving node dst is to the sender src.
SELF, FROM_CHILD, FROM_HEAD, FROM_LEFT, FROM_RIGHT, CLS_EDGE = range(6)
EDGE_TYPES = ("self", "from_child", "from_head", "from_left", "from_right", "cls")
STRUCTURAL_PE = ("lap_pe", "random_walk_pe")  # positional encodings computed from a graph, per sentence
PE_GRAPHS = ("tree", "chain", "graph")  # which graph they are computed on

Edges = tuple[torch.Tensor, torch.Tensor]


def _without_self_loops(src: torch.Tensor, dst: torch.Tensor) -> Edges:
    keep = src != dst
    return src[keep], dst[keep]


def _with_self_loops(src: torch.Tensor, dst: torch.Tensor, n: int) -> Edges:
    src, dst = _without_self_loops(src, dst)
    loop = torch.arange(n)
    return torch.cat([src, loop]), torch.cat([dst, loop])


def complete_edges(n: int, self_loops: bool = True) -> Edges:
    """Every token from every token: n^2 edges with self loops, n(n-1) without."""
    src = torch.arange(n).repeat_interleave(n)
    dst = torch.arange(n).repeat(n)
    return (src, dst) if self_loops else _without_self_loops(src, dst)


def tree_edges(heads: list[int], self_loops: bool = True) -> Edges:
    """Each token to its head and back (``heads[i] = -1`` marks the root)."""
    child = torch.tensor([i for i, h in enumerate(heads) if h >= 0], dtype=torch.long)
    parent = torch.tensor([h for h in heads if h >= 0], dtype=torch.long)
    src, dst = torch.cat([child, parent]), torch.cat([parent, child])
    return _with_self_loops(src, dst, len(heads)) if self_loops else (src, dst)


def window_edges(n: int, window: int, self_loops: bool = True) -> Edges:
    """Token i from every token j with ``|i - j| <= window``."""
    src, dst = complete_edges(n, self_loops)
    keep = (src - dst).abs() <= window
    return src[keep], dst[keep]


def bpt_spans(n: int) -> list[tuple[int, int]]:
    """The span nodes of the binary partition of n tokens, as token ranges ``[lo, hi)``, in node order.

    Level l cuts the tokens into aligned blocks of 2^l: ``[b·2^l, min((b+1)·2^l, n))``; levels go up
    until one block holds every token (the root). A block of one token is that token, and a block with
    the same tokens as the block below it is that block (the ragged right edge when n is not a power of
    two), so every span node has two children and there are exactly n - 1 of them. Nodes are numbered
    level by level, left to right, after the tokens: the root is the last.
    """
    spans, seen = [], set()
    size = 2
    while n > 1:
        for lo in range(0, n, size):
            span = (lo, min(lo + size, n))
            if span[1] - span[0] > 1 and span not in seen:
                seen.add(span)
                spans.append(span)
        if size >= n:
            break
        size *= 2
    return spans


def bpt_edges(n: int, k: int = 4, self_loops: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """The binary-partition graph of BP-Transformer (Ye et al., 2019) over n tokens, with its span
    nodes: ``(src, dst, etype, number of span nodes)``.

    * **Span <- token** (the paper's affiliated edges): a span node receives from every token it
      covers, so one layer makes it a summary of its span; n·log2(n) edges.
    * **Token <- context** (the paper's contextual edges, fine near, coarse far): token i receives
      from its k nearest tokens on each side (level 0); then, going out on each side, from up to k
      blocks of level 1, then k of level 2, and so on. Before the k blocks of level l, one block of
      level l - 1 is taken when the covered stretch does not end on a level-l boundary, so the
      stretches never overlap and never leave a gap: the senders of token i cover every other token
      exactly once (tests/engine/test_long_range.py checks it): at most 2(k + 1) senders per level, over about
      log2(n / k) levels (57 per token at n = 1,000 with k = 4).

    Edge types: a span hears a token ``from_child``; a token hears a sender on its left ``from_left``,
    on its right ``from_right``; ``self`` for self loops.
    """
    spans = bpt_spans(n)
    node_of = {span: n + s for s, span in enumerate(spans)}
    node_of.update({(i, i + 1): i for i in range(n)})
    src, dst, etype = [], [], []

    def block(level: int, b: int) -> int:
        size = 1 << level
        return node_of[(b * size, min((b + 1) * size, n))]

    for s, (lo, hi) in enumerate(spans):  # affiliated edges
        src += range(lo, hi)
        dst += [n + s] * (hi - lo)
        etype += [FROM_CHILD] * (hi - lo)
    for i in range(n):
        senders = list(range(max(0, i - k), i))  # level 0, left
        left, level = max(0, i - k), 1
        while left > 0:
            half = 1 << (level - 1)
            if left % (1 << level):  # finish the level below first: left is a multiple of half
                left -= half
                senders.append(block(level - 1, left // half))
            for _ in range(k):
                if left == 0:
                    break
                left -= 1 << level
                senders.append(block(level, left >> level))
            level += 1
        src += senders
        dst += [i] * len(senders)
        etype += [FROM_LEFT] * len(senders)
        senders = list(range(i + 1, min(n, i + 1 + k)))  # level 0, right
        right, level = min(n, i + 1 + k), 1
        while right < n:
            half = 1 << (level - 1)
            if right % (1 << level):
                senders.append(block(level - 1, right // half))
                right += half
            for _ in range(k):
                if right >= n:
                    break
                senders.append(block(level, right >> level))
                right += 1 << level
            level += 1
        src += senders
        dst += [i] * len(senders)
        etype += [FROM_RIGHT] * len(senders)
    src, dst, etype = (torch.tensor(x, dtype=torch.long) for x in (src, dst, etype))
    if self_loops:
        loop = torch.arange(n + len(spans))
        src, dst = torch.cat([src, loop]), torch.cat([dst, loop])
        etype = torch.cat([etype, torch.full_like(loop, SELF)])
    return src, dst, etype, len(spans)


def self_loop_edges(n: int) -> Edges:
    """Each token hears only itself."""
    loop = torch.arange(n)
    return loop, loop.clone()


def cls_edges(n: int, self_loops: bool = True) -> Edges:
    """Edges between the ``<cls>`` node (index n) and tokens 0..n-1, both ways."""
    tokens = torch.arange(n)
    cls = torch.full((n,), n, dtype=torch.long)
    src, dst = torch.cat([tokens, cls]), torch.cat([cls, tokens])
    if self_loops:
        src, dst = torch.cat([src, torch.tensor([n])]), torch.cat([dst, torch.tensor([n])])
    return src, dst


def knn_edges(x: torch.Tensor, sizes: list[int], k: int, self_loops: bool = True) -> Edges:
    """Each point from its ``k`` nearest other points of the same segment (edges over all points).

    ``x`` is (N, d) with segments of ``sizes`` points laid end to end. A segment with at most
    k+1 points is joined completely (every point has fewer than k others to choose from).
    """
    x = x.detach()
    offsets = torch.tensor([0] + list(sizes[:-1]), device=x.device).cumsum(0)
    small = [i for i, s in enumerate(sizes) if s <= k + 1]
    large = [i for i, s in enumerate(sizes) if s > k + 1]
    srcs, dsts = [], []
    for i in small:
        s, d = complete_edges(sizes[i], self_loops=False)
        srcs.append(s.to(x.device) + offsets[i])
        dsts.append(d.to(x.device) + offsets[i])
    if large:
        idx = torch.cat([torch.arange(sizes[i], device=x.device) + offsets[i] for i in large])
        g = dgl.segmented_knn_graph(x[idx], k, [sizes[i] for i in large], exclude_self=True)
        s, d = g.edges()  # edge neighbour -> point (checked in tests/data/test_graphs.py)
        srcs.append(idx[s])
        dsts.append(idx[d])
    src, dst = torch.cat(srcs), torch.cat(dsts)
    if self_loops:
        loop = torch.arange(x.shape[0], device=x.device)
        src, dst = torch.cat([src, loop]), torch.cat([dst, loop])
    return src, dst


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
    On trees, eigenvalues repeat (leaves of one operator share eigenvalue 1), so beyond the first
    few columns the basis within a repeated eigenspace is arbitrary: the encoding is most
    informative in its first columns.
    """
    a = _undirected_simple(src, dst, n)
    d = a.sum(1).clamp(min=1).pow(-0.5)
    lap = torch.eye(n, dtype=torch.float64) - d[:, None] * a * d[None, :]
    _, vecs = torch.linalg.eigh(lap)  # ascending eigenvalues
    vecs = vecs[:, 1 : k + 1]  # drop the trivial eigenvector
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


def children_of(heads: list[int]) -> list[list[int]]:
    """The children of every node, in index order."""
    kids: list[list[int]] = [[] for _ in heads]
    for i, h in enumerate(heads):
        if h >= 0:
            kids[h].append(i)
    return kids


def binarise(heads: list[int]) -> tuple[list[int], list[int]]:
    """Left-to-right binarisation of a tree over n tokens: ``(parent, slot)`` of n tokens + p phrase nodes.

    A head with dependents d1..dk becomes k phrase nodes: ``(head d1)``, ``((head d1) d2)``, ...,
    the last standing where the head stood. ``slot`` is 0 for a phrase's left child, 1 for its
    right child (-1 at the root). Phrase nodes are numbered n, n+1, ... in the order they are made
    (a dependent's phrases before its head's). On ListOps this gives exactly the published files'
    parentheses: ``[MAX 2 9 ]`` (heads ``[-1, 0, 0, 0]``) -> ``( ( ( [MAX 2 ) 9 ) ] )``, phrases
    4 = (0 1), 5 = (4 2), 6 = (5 3).
    """
    kids = children_of(heads)
    parent, slot = list(heads), [-1] * len(heads)  # tokens first; phrase nodes are appended
    top = list(range(len(heads)))  # the node that stands for token i's whole subtree

    def build(i: int) -> None:
        for k in kids[i]:
            build(k)
        left = i
        for k in kids[i]:
            phrase = len(parent)
            parent.append(-1)
            slot.append(-1)
            parent[left], slot[left] = phrase, 0
            parent[top[k]], slot[top[k]] = phrase, 1
            left = phrase
        top[i] = left

    for r in (i for i, h in enumerate(heads) if h < 0):
        build(r)
    return parent, slot


def tree_schedule(parent: list[int], slot: list[int] | None = None) -> tuple[list[int], list[int]]:
    """``(slot, height)`` of every node. ``slot``, a node's place among its parent's children (-1 at
    a root), is taken as given or else counted in index (sentence) order. ``height`` is 0 at a leaf,
    1 + its tallest child's height otherwise: a node can be computed once every node of lower height
    is (the recursive models' level-by-level schedule)."""
    if slot is None:
        slot = [-1] * len(parent)
        for kids in children_of(parent):
            for s, k in enumerate(kids):
                slot[k] = s
    height = [0] * len(parent)
    depth = [0] * len(parent)
    for i in range(len(parent)):  # depth by walking up: trees here are small
        j = i
        while parent[j] >= 0:
            depth[i] += 1
            j = parent[j]
    for i in sorted(range(len(parent)), key=lambda i: -depth[i]):  # deepest first
        if parent[i] >= 0:
            height[parent[i]] = max(height[parent[i]], height[i] + 1)
    return list(slot), height


def edge_types(src: torch.Tensor, dst: torch.Tensor, parent: torch.Tensor | None = None) -> torch.Tensor:
    """``edata['etype']`` of edges ``src -> dst`` between nodes numbered in sentence order: from the
    node itself, from a child, from the head, else from the left or the right by index."""
    etype = torch.where(src < dst, FROM_LEFT, FROM_RIGHT)
    if parent is not None:
        etype = torch.where(parent[src] == dst, FROM_CHILD, etype)
        etype = torch.where(parent[dst] == src, FROM_HEAD, etype)
    return torch.where(src == dst, SELF, etype)


def positional_edge_types(pos: torch.Tensor) -> torch.Tensor:
    """(B, n, n) edge types of every pair of a padded batch by position alone (:func:`edge_types`
    without a tree): self on the diagonal, <cls> to/from a node with ``pos < 0``, else left/right.
    ``pos`` (B, n) is each node's position, -1 at <cls> (and at padding, which no edge touches)."""
    n = pos.shape[1]
    i = torch.arange(n, device=pos.device)
    etype = torch.where(i[None, :] < i[:, None], FROM_LEFT, FROM_RIGHT).expand(pos.shape[0], n, n)  # j < i: left
    etype = torch.where((pos[:, :, None] < 0) | (pos[:, None, :] < 0), CLS_EDGE, etype)
    return torch.where(torch.eye(n, dtype=torch.bool, device=pos.device), SELF, etype)


def knn_adjacency(h: torch.Tensor, candidates: torch.Tensor, k: int) -> torch.Tensor:
    """(B, n, n) bool: each candidate receives from its k nearest other candidates (Euclidean).

    ``h`` (B, n, d) padded features, ``candidates`` (B, n) bool. A graph with at most k+1
    candidates is joined completely, as in :func:`knn_edges`.
    """
    h = h.detach()
    dist = torch.cdist(h, h)  # (B, n, n)
    n = h.shape[1]
    pair = candidates[:, :, None] & candidates[:, None, :] & ~torch.eye(n, dtype=torch.bool, device=h.device)
    dist = dist.masked_fill(~pair, float("inf"))
    k_eff = min(k, max(n - 1, 1))
    nearest = dist.topk(k_eff, dim=-1, largest=False)  # (B, n, k) per receiving point
    adj = torch.zeros_like(pair)
    adj.scatter_(-1, nearest.indices, torch.isfinite(nearest.values))
    return adj & pair


# --------------------------------------------------------------------------------------------
# The registry: one GraphKind per construction, holding every fact about it.
# --------------------------------------------------------------------------------------------
@dataclass
class Built:
    """What a construction's ``build`` returns for one sentence of n tokens: its edges, and what the
    generic assembler (:meth:`GraphConstruction.__call__`) cannot infer."""

    src: torch.Tensor
    dst: torch.Tensor
    etype: torch.Tensor | None = None  # None: typed by :func:`edge_types` (from the tree's parents, if any)
    extra: int = 0  # nodes of its own after the tokens (phrases, spans): token <phrase>, pos -1
    parents: list[int] | None = None  # a tree construction's parent of every node (-1 at a root)
    order: list[int] | None = None  # and each node's slot among its parent's children (None: sentence order)
    root: int | None = None  # the node ``ndata['root']`` marks; None: the tree's root, else token 0


@dataclass(frozen=True)
class GraphKind:
    """Everything the rest of the code needs to know about one graph construction.

    ``build(construction, n, heads, tree) -> Built`` makes the edges of one sentence (``heads``: a tree
    over the tokens, -1 at a root; ``tree``: a gold ``(parent, slot)`` with phrase nodes, or None).
    ``edge_count(construction, n)``: the edges of an n-token sentence in closed form (exact or an upper
    bound), for the memory plan (None: build one and count). A ``dynamic`` construction gets its edges in the model's forward pass
    from ``rebuild`` (sparse, a DGLGraph) and ``rebuild_dense`` (the padded twin, a DenseGraph).
    """

    name: str
    build: Callable[..., Built]
    description: str = ""
    is_tree: bool = False  # carries a tree (ndata parent, slot, height): the recursive models can walk it
    adds_nodes: bool = False  # always adds about n nodes of its own (pos -1): 2n nodes for the memory plan
    node_word: str = "phrase"  # what those nodes are called in messages
    dynamic: bool = False  # edges rebuilt from the model's features at every layer (kNN)
    edge_count: Callable[..., int] | None = None
    rebuild: Callable | None = None
    rebuild_dense: Callable | None = None
    gold_tree: bool = False  # reads a dataset's gold tree when it has one (else the dependency parse)
    text_only: bool = False  # needs a dependency parse: text datasets only
    binary: bool = False  # every node has at most two ordered children (the binary Tree-LSTM's cell)
    dense_complete: bool = False  # with self loops, every node hears every node: the dense path needs no mask
    cls_error: str | None = None  # why readout=cls is refused on this construction (None: allowed)
    no_pe_graph: str | None = None  # why model.pe_graph=graph is refused on it (None: allowed)
    # the word-level graph data/wordpiece.py lifts to word pieces (a pretrained model's own tokens):
    # (n_words, heads, parent, window, k) -> (src, dst, extra nodes, their word spans); None: not on pieces
    word_graph: Callable | None = None


GRAPH_KINDS: dict[str, GraphKind] = {}


def register_graph(kind: GraphKind) -> GraphKind:
    """Add a construction to the registry (``graph=<name>`` then selects it; conf/graph/<name>.yaml sets its keys)."""
    GRAPH_KINDS[kind.name] = kind
    return kind


def graph_kind(name: str) -> GraphKind:
    """The registered construction ``name``; the one place an unknown graph name is refused."""
    if name not in GRAPH_KINDS:
        raise ValueError(f"unknown graph {name!r}; valid graphs: {', '.join(GRAPH_KINDS)}")
    return GRAPH_KINDS[name]


def tree_graphs() -> tuple[str, ...]:
    """The registered constructions that carry a tree."""
    return tuple(k.name for k in GRAPH_KINDS.values() if k.is_tree)


@dataclass
class GraphConstruction:
    """A named construction with its settings: ``construction(tok_ids, heads) -> DGLGraph``.

    The graph carries ``ndata['tok']`` (token ids), ``ndata['pos']`` (positions, -1 for
    ``<cls>``) and ``ndata['root']`` (True at the tree's root, else at token 0).
    For a ``dynamic`` construction (knn), the graph built here holds only the nodes (and ``<cls>``
    edges); the model calls :meth:`rebuild` with its current features.
    Its facts (tree, extra nodes, edge count...) are its :class:`GraphKind`'s, ``self.kind``.
    """

    name: str = "complete"
    self_loops: bool = True
    window: int = 2
    k: int = 4
    cls_id: int | None = None  # append a <cls> virtual node with this token id
    phrase_id: int = SPECIALS.index(PHRASE)  # binary_tree: the token id of phrase nodes (<phrase>)
    pe: str | None = None  # lap_pe | random_walk_pe: store ndata['pe'] (n, pe_dim), zeros at <cls>
    pe_dim: int = 8
    pe_graph: str = "tree"  # the graph the positions come from: tree | chain (i - 1 -- i) | graph (this one)

    def __post_init__(self):
        kind = graph_kind(self.name)
        if self.pe is not None and self.pe not in STRUCTURAL_PE:
            raise ValueError(f"unknown structural positional encoding {self.pe!r}; valid: {', '.join(STRUCTURAL_PE)}")
        if self.pe_graph not in PE_GRAPHS:
            raise ValueError(f"unknown model.pe_graph {self.pe_graph!r}; valid: {', '.join(PE_GRAPHS)}")
        if kind.cls_error and self.cls_id is not None:
            raise ValueError(kind.cls_error)
        if kind.adds_nodes and self.pe is not None:
            raise ValueError(
                f"model.positional={self.pe} is not defined on graph={self.name}'s {kind.node_word} nodes; "
                "use model.positional=sinusoidal or none"
            )
        if self.pe is not None and self.pe_graph == "graph" and kind.no_pe_graph:
            raise ValueError(
                f"model.pe_graph=graph cannot use graph={self.name} ({kind.no_pe_graph}): "
                "use model.pe_graph=tree or chain"
            )

    @property
    def kind(self) -> GraphKind:
        return GRAPH_KINDS[self.name]

    @property
    def dynamic(self) -> bool:
        return self.kind.dynamic

    @property
    def dense_complete(self) -> bool:
        """Every node hears every node (self included): the dense twin needs no adjacency mask."""
        return self.kind.dense_complete and self.self_loops

    def num_nodes(self, n: int) -> int:
        """Nodes of the graph of an n-token sentence (an upper bound: <cls> aside), for the memory plan."""
        return 2 * n if self.kind.adds_nodes else n

    def edge_count(self, n: int) -> int:
        """Edges of the graph of one n-token sentence, without building the big ones."""
        if self.kind.edge_count is not None:
            return self.kind.edge_count(self, n)
        return self(list(range(n)), [-1] + [0] * (n - 1)).num_edges()

    def positions(self, n: int, heads: list[int] | None, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        """The structural positional encoding (n, pe_dim) of one sentence."""
        if self.pe_graph == "tree":
            if heads is None:
                raise ValueError(f"model.positional={self.pe} on the tree needs a tree; set model.pe_graph=chain")
            src, dst = tree_edges(heads, self_loops=False)
        elif self.pe_graph == "chain":
            src, dst = torch.arange(n - 1), torch.arange(1, n)
        compute = laplacian_pe if self.pe == "lap_pe" else random_walk_pe
        return compute(src, dst, n, self.pe_dim)

    def tree_of(self, n: int, heads: list[int] | None, tree=None) -> tuple[list[int], list[int] | None]:
        """``(parent, slot)`` of the tree a tree construction walks, over the n tokens and any phrase nodes
        after them (``slot`` None: children in sentence order). ``heads`` is a tree over the tokens
        (ListOps' expression tree, a dependency parse); ``tree`` a gold ``(parent, slot)`` with phrase
        nodes (SST's constituency tree), read by the constructions whose kind says ``gold_tree``."""
        kind = self.kind
        if not kind.gold_tree or tree is None:
            if heads is None:
                what = "a dependency parse (text datasets have one)" if kind.text_only else "a tree"
                raise ValueError(
                    f"graph={self.name} needs {what} for every sentence; ListOps and the text datasets have one"
                )
            if len(heads) != n:
                raise ValueError(f"a tree over {len(heads)} tokens for a sentence of {n}")
            return binarise(heads) if kind.adds_nodes else (list(heads), None)
        parent, slot = list(tree[0]), list(tree[1])
        if len(parent) < n or len(slot) != len(parent):
            raise ValueError(f"a gold tree of {len(parent)} nodes for a sentence of {n} tokens")
        if kind.adds_nodes and any(len(k) > 2 for k in children_of(parent)):
            raise ValueError(f"graph={self.name} needs a binary gold tree (SST's are); use graph=tree")
        return parent, slot

    def edges(self, n: int, heads: list[int] | None) -> Edges:
        """The edges over the n tokens (and any nodes of the construction's own) of one sentence."""
        built = self.kind.build(self, n, heads, None)
        return built.src, built.dst

    def __call__(self, tok_ids: list[int], heads: list[int] | None = None, tree=None) -> dgl.DGLGraph:
        """The graph of one sentence: token ids, its tree over the tokens (``heads``, -1 at a root) and,
        where the dataset has one, its gold tree ``(parent, slot)`` with phrase nodes (SST). The
        construction's ``build`` gives the edges; everything else is assembled the same way for all."""
        n = len(tok_ids)
        built = self.kind.build(self, n, heads, tree)
        src, dst, extra, parents, order = built.src, built.dst, built.extra, built.parents, built.order
        tok = torch.cat(
            [torch.tensor(tok_ids, dtype=torch.long), torch.full((extra,), self.phrase_id, dtype=torch.long)]
        )
        pos = torch.cat([torch.arange(n), torch.full((extra,), -1, dtype=torch.long)])
        num = len(tok)
        root = torch.zeros(num, dtype=torch.bool)
        ref = parents if parents is not None else heads
        if built.root is not None:
            root[built.root] = True
        else:
            root[ref.index(-1) if ref is not None and -1 in ref else 0] = True
        parent = torch.tensor(parents, dtype=torch.long) if parents is not None else None
        etype = built.etype if built.etype is not None else edge_types(src, dst, parent)
        pe = self.positions(n, heads, src, dst) if self.pe is not None else None
        if self.cls_id is not None:
            cs, cd = cls_edges(num, self.self_loops)
            cls_type = torch.where(cs == cd, SELF, CLS_EDGE)
            src, dst, etype = torch.cat([src, cs]), torch.cat([dst, cd]), torch.cat([etype, cls_type])
            tok = torch.cat([tok, torch.tensor([self.cls_id])])
            pos = torch.cat([pos, torch.tensor([-1])])
            root = torch.cat([root, torch.tensor([False])])
            pe = None if pe is None else torch.cat([pe, torch.zeros(1, self.pe_dim)])
            parent = None if parent is None else torch.cat([parent, torch.tensor([-1])])
            parents = None if parents is None else parents + [-1]
            order = None if order is None else order + [-1]
            num += 1
        g = dgl.graph((src, dst), num_nodes=num)
        g.ndata["tok"], g.ndata["pos"], g.ndata["root"] = tok, pos, root
        g.edata["etype"] = etype
        if parents is not None:
            slot, height = tree_schedule(parents, order)
            g.ndata["parent"] = parent
            g.ndata["slot"], g.ndata["height"] = torch.tensor(slot), torch.tensor(height)
        if pe is not None:
            g.ndata["pe"] = pe
        return g

    def rebuild(self, g: dgl.DGLGraph, h: torch.Tensor) -> dgl.DGLGraph:
        """A dynamic construction's graph of a batch from node features ``h`` (N, d); same nodes as ``g``."""
        return self.kind.rebuild(self, g, h)

    def rebuild_dense(self, dg, x: torch.Tensor, tokens: torch.Tensor, typed: bool):
        """The same, on the padded twin ``dg`` (``models.dense.DenseGraph``) from features (B, n, d);
        ``tokens`` (B, n) marks token nodes; ``typed``: also the (B, n, n) edge types."""
        return self.kind.rebuild_dense(self, dg, x, tokens, typed)


# --------------------------------------------------------------------------------------------
# The built-in constructions: a build function each, and its entry.
# --------------------------------------------------------------------------------------------
def _build_complete(c: GraphConstruction, n: int, heads, tree) -> Built:
    return Built(*complete_edges(n, c.self_loops))


def _build_tree(c: GraphConstruction, n: int, heads, tree) -> Built:
    parents, order = c.tree_of(n, heads, tree)
    extra = len(parents) - n  # phrase nodes
    if extra and c.pe is not None:
        raise ValueError(
            f"model.positional={c.pe} is not defined on phrase nodes (graph={c.name} on a gold "
            "constituency tree): use model.positional=sinusoidal or none, or graph=dep"
        )
    return Built(*tree_edges(parents, c.self_loops), extra=extra, parents=parents, order=order)


def _build_window(c: GraphConstruction, n: int, heads, tree) -> Built:
    return Built(*window_edges(n, c.window, c.self_loops))


def _build_bpt(c: GraphConstruction, n: int, heads, tree) -> Built:
    src, dst, etype, extra = bpt_edges(n, c.k, c.self_loops)
    return Built(src, dst, etype, extra=extra, root=n + extra - 1)  # the span of the whole sentence


def _build_nodes_only(c: GraphConstruction, n: int, heads, tree) -> Built:
    return Built(torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long))  # edges come later


def _build_self_only(c: GraphConstruction, n: int, heads, tree) -> Built:
    return Built(*self_loop_edges(n))


def _knn_rebuild(c: GraphConstruction, g: dgl.DGLGraph, h: torch.Tensor) -> dgl.DGLGraph:
    """The kNN graph of a batch from node features ``h`` (N, d); same nodes as ``g``."""
    is_token = g.ndata["pos"] >= 0
    sizes = g.batch_num_nodes()
    if c.cls_id is None:
        src, dst = knn_edges(h, sizes.tolist(), c.k, c.self_loops)
        etype = edge_types(src, dst)
    else:  # kNN among tokens only, then the <cls> edges of the static graph
        token_idx = is_token.nonzero().squeeze(1)
        s, d = knn_edges(h[token_idx], (sizes - 1).tolist(), c.k, c.self_loops)
        cs, cd = g.edges()
        src, dst = torch.cat([token_idx[s], cs]), torch.cat([token_idx[d], cd])
        etype = torch.cat([edge_types(token_idx[s], token_idx[d]), g.edata["etype"].to(h.device)])
    out = dgl.graph((src, dst), num_nodes=g.num_nodes(), device=h.device)
    out.edata["etype"] = etype
    return out


def _knn_rebuild_dense(c: GraphConstruction, dg, x: torch.Tensor, tokens: torch.Tensor, typed: bool):
    """This layer's kNN graph from padded features (B, n, d), as :func:`_knn_rebuild` builds it sparse:
    tokens from their k nearest tokens, plus the static <cls> edges and self loops."""
    adj = knn_adjacency(x, tokens, c.k) | dg.adjacency()
    if c.self_loops:
        adj = adj | (torch.eye(x.shape[1], dtype=torch.bool, device=x.device) & tokens[:, :, None])
    etype = positional_edge_types(torch.where(tokens, 0, -1)) if typed else None  # pos -1 marks <cls>
    return replace(dg, adj=adj, etype=etype)


# The word-level graphs data/wordpiece.py lifts to pieces: (src, dst, extra nodes, the extra nodes' word spans).
def _words_complete(n: int, heads, parent, window: int, k: int):
    return (*complete_edges(n), 0, [])


def _words_window(n: int, heads, parent, window: int, k: int):
    return (*window_edges(n, window), 0, [])


def _words_self(n: int, heads, parent, window: int, k: int):
    return (*self_loop_edges(n), 0, [])


def _words_tree(n: int, heads, parent, window: int, k: int):
    """The gold constituency tree (``parent``: phrases become extra nodes), else the dependency tree."""
    if parent is not None:
        from data.wordpiece import constituency_edges

        return constituency_edges(list(parent), n)
    if heads is None or len(heads) != n:
        raise ValueError(f"a tree over {n} words needs one head per word: use a text dataset (parsed by spaCy)")
    return (*tree_edges(list(heads)), 0, [])


def _words_bpt(n: int, heads, parent, window: int, k: int):
    src, dst, _, n_spans = bpt_edges(n, k=k)
    return src, dst, n_spans, bpt_spans(n)


def _tree_count(c: GraphConstruction, n: int) -> int:
    return 5 * n  # both ways along each tree edge, self loops (binary_tree: ~2n nodes)


for _kind in (
    GraphKind(
        "complete",
        _build_complete,
        "every token receives from every token: a Transformer layer",
        edge_count=lambda c, n: n * n if c.self_loops else n * (n - 1),
        dense_complete=True,
        word_graph=_words_complete,
    ),
    GraphKind(
        "tree",
        _build_tree,
        "the dataset's tree, both ways (SST: the gold tree with phrase nodes; else the dependency parse)",
        is_tree=True,
        edge_count=_tree_count,
        gold_tree=True,
        word_graph=_words_tree,
    ),
    GraphKind(
        "dep",
        _build_tree,
        "spaCy's dependency parse: each word joined to its head, both ways",
        is_tree=True,
        edge_count=_tree_count,
        text_only=True,
        word_graph=_words_tree,  # never handed a gold tree (only gold_tree kinds are)
    ),
    GraphKind(
        "binary_tree",
        _build_tree,
        "the tree binarised left to right through phrase nodes",
        is_tree=True,
        adds_nodes=True,
        binary=True,
        edge_count=_tree_count,
        gold_tree=True,
        cls_error="model.readout=cls adds a <cls> node, and graph=binary_tree's phrase nodes already read the "
        "whole tree: use model.readout=root (the root phrase) or mean",
    ),
    GraphKind(
        "window",
        _build_window,
        "every token receives from the tokens at most `window` positions away",
        word_graph=_words_window,
    ),
    GraphKind(
        "bpt",
        _build_bpt,
        "BP-Transformer's binary partition: span nodes, O(k n log n) edges",
        adds_nodes=True,
        node_word="span",
        word_graph=_words_bpt,
    ),
    GraphKind(
        "knn",
        _build_nodes_only,
        "every token receives from its k nearest tokens in the model's current features, rebuilt per layer",
        dynamic=True,
        edge_count=lambda c, n: (c.k + 1) * n,  # k neighbours and a self loop per token
        rebuild=_knn_rebuild,
        rebuild_dense=_knn_rebuild_dense,
        no_pe_graph="knn's edges change every layer",
    ),
    GraphKind(
        "none",
        _build_self_only,
        "every token hears only itself: a bag of tokens",
        no_pe_graph="none has no edges to encode",
        word_graph=_words_self,
    ),
):
    register_graph(_kind)

GRAPHS = tuple(GRAPH_KINDS)  # the built-in constructions, in the order the docs list them
