"""WordPiece tokens as graph nodes, and one rule that lifts any word-level graph to them.

A pretrained BERT-style model (``models/minilm.py``) reads WordPiece tokens, not words: "unbelievably"
is ``un ##bel ##ie ##va ##bly``, and every sentence is framed as ``[CLS] pieces... [SEP]``. The
graphs of ``data/graphs/`` are built over *words* (a dependency parse, a window of words, the
binary partition of BP-Transformer). This module turns a sentence given as words into pieces, each
with the index of the word it came from, and lifts a word-level edge list to the pieces by the rule of
``data/graphs/lift.py`` (``lift_edges``: a word's pieces linked to each other, each piece inheriting its word's
edges, [CLS] and [SEP] global; each construction's word-level graph is its ``GraphKind.word_graph``).
Lifting the complete word graph (self loops
included) gives the complete graph over ``[CLS] pieces [SEP]``: exactly the full attention of HF's
``BertModel`` (tests/models/test_minilm.py checks it layer by layer). Lifting ``none`` (each word hears only
itself) leaves each word a bag of its pieces that can still read [CLS] and [SEP].

Graph nodes, per sentence, in this order: ``[CLS]``, the pieces, ``[SEP]``, then any extra nodes.
``ndata``: ``tok`` (vocabulary id; ``[MASK]`` for extra nodes, which have no token of their own),
``pos`` (BERT position id: 0 at [CLS], i at the i-th piece; an extra node takes its first piece's),
``segment`` (token type, 0: one sentence) and ``pool`` (1 for the nodes the sentence-transformers mean
pools over, [CLS] and [SEP] included; 0 for extra nodes).

``tree`` takes either dependency-style ``heads`` (each word linked both ways to its head) or, for SST, the
gold constituency tree as ``parent`` (``data.corpora.read_sst``'s form: words 0..n-1, then the phrase
nodes, children before parents, -1 at the root). With ``parent`` every phrase is an extra node, fed the
``[MASK]`` embedding at the position of its first piece (as bpt's spans), and linked both ways to each
of its children: a word child by its pieces (rule 2), a phrase child as the single node it is.

**Tree distances on the edges** (``PieceConstruction.distances``, set by ``model.structure_bias`` and
``model.syntax_layers``): every edge ``j -> i`` of the lifted graph carries ``edata["dist"]``, the bucket of
the distance between the two pieces' words in the sentence's tree (``dep``: the dependency parse; ``tree``:
the gold constituency tree, its phrases as intermediate nodes, so two sister words are 2 apart):
0 (the same word), 1, 2, 3, 4 (4 or more), 5 (not connected: a parse with two roots) and 6 (an end is
[CLS], [SEP] or an extra node). ``tree`` on a dataset without a gold tree (TREC) uses the dependency parse,
as ``graph=tree`` does, and logs that once.

Truncation follows sentence-transformers: at most ``max_pieces`` = 256 nodes with [CLS] and [SEP]
(its ``max_seq_length``), so at most 254 word pieces; what is cut is counted in ``Pieces.truncated``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import dgl
import torch

from data.graphs import GRAPH_KINDS, GraphKind, graph_kind
from data.graphs.lift import lift_edges, phrase_spans

log = logging.getLogger(__name__)

MAX_PIECES = 256  # all-MiniLM-L6-v2's max_seq_length (sentence_bert_config.json), [CLS] and [SEP] included


# edata["dist"]: the bucket of the tree distance between the words at the two ends of an edge
DIST_BUCKETS = ("0", "1", "2", "3", "4+", "not connected", "[CLS]/[SEP]")
FAR, UNCONNECTED, SPECIAL = 4, 5, 6  # 4 or more; no path in the tree; an end that is no word


def distance_trees() -> tuple[str, ...]:
    """The trees ``PieceConstruction.distances`` can measure: the registered tree kinds that lift to pieces
    (``dep``: the dependency parse; ``tree``: the gold tree where the dataset has one)."""
    return tuple(k.name for k in GRAPH_KINDS.values() if k.is_tree and k.word_graph is not None)


def dependency_tree() -> str:
    """The tree kind built from the dependency parse alone (no gold tree): ``dep``."""
    return next(name for name in distance_trees() if not graph_kind(name).gold_tree)


@dataclass
class Pieces:
    """One sentence as WordPiece nodes ``[CLS] p_1 ... p_k [SEP]``."""

    ids: list[int]  # vocabulary ids, [CLS] first and [SEP] last
    word: list[int]  # index of the word each id came from; -1 at [CLS] and [SEP]
    n_words: int  # words given (some may have lost their pieces to truncation)
    truncated: int = 0  # word pieces cut to fit max_pieces (0 when the sentence fits)

    def __len__(self) -> int:
        return len(self.ids)


class WordPiece:
    """The model's own WordPiece tokenizer (``tokenizer.json``, read by the ``tokenizers`` library),
    with padding and the file's truncation switched off: truncation is done here, and counted."""

    def __init__(self, tokenizer_file: str | Path, max_pieces: int = MAX_PIECES):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.max_pieces = max_pieces
        ids = {name: self.tokenizer.token_to_id(name) for name in ("[CLS]", "[SEP]", "[MASK]", "[PAD]")}
        missing = [name for name, i in ids.items() if i is None]
        if missing:
            raise ValueError(f"{tokenizer_file}: no {', '.join(missing)} in the vocabulary: not a BERT WordPiece file")
        self.cls_id, self.sep_id, self.mask_id, self.pad_id = (ids[k] for k in ("[CLS]", "[SEP]", "[MASK]", "[PAD]"))

    def pieces(self, words: Sequence[str]) -> Pieces:
        """Words -> ``[CLS] pieces [SEP]`` with each piece's word index; at most ``max_pieces`` nodes."""
        words = list(words)
        if not words:
            return Pieces([self.cls_id, self.sep_id], [-1, -1], 0)
        enc = self.tokenizer.encode(words, is_pretokenized=True, add_special_tokens=False)
        ids, word = list(enc.ids), list(enc.word_ids)
        keep = self.max_pieces - 2
        cut = max(0, len(ids) - keep)
        ids, word = ids[:keep], word[:keep]
        return Pieces([self.cls_id, *ids, self.sep_id], [-1, *word, -1], len(words), cut)

    def text(self, line: str) -> Pieces:
        """A line of text, its words split at whitespace (WordPiece splits punctuation off them itself)."""
        return self.pieces(line.split())

    def tokens(self, pieces: Pieces) -> list[str]:
        return [self.tokenizer.id_to_token(i) for i in pieces.ids]


def truncate_tree(parent: Sequence[int], n_words: int, kept: int) -> list[int]:
    """The gold tree restricted to the first ``kept`` words: phrases with no kept word are dropped and the
    rest renumbered; a node whose parent was dropped becomes a root (cannot happen: truncation cuts a
    suffix, and a phrase that holds a kept word has ancestors that hold it too)."""
    parent = list(parent)
    if kept >= n_words:
        return parent
    spans = phrase_spans(parent, n_words)
    keep = list(range(kept)) + [n_words + k for k, (lo, _) in enumerate(spans) if lo < kept]
    new = {old: i for i, old in enumerate(keep)}
    return [new.get(parent[old], -1) for old in keep]


def word_distances(
    n_words: int, heads: Sequence[int] | None = None, parent: Sequence[int] | None = None
) -> torch.Tensor:
    """(n_words, n_words) long: the number of tree edges between two words, -1 where no path joins them.
    The tree is the dependency parse ``heads`` (-1 at a root) or, given, the constituency tree ``parent``
    (words 0..n-1, then phrases; its phrases are intermediate nodes of the paths)."""
    if parent is not None:
        n_nodes, links = len(parent), [(i, p) for i, p in enumerate(parent) if p >= 0]
    else:
        if heads is None or len(heads) != n_words:
            raise ValueError(
                f"tree distances over {n_words} words need one head per word: use a text dataset (parsed by spaCy)"
            )
        n_nodes, links = n_words, [(i, h) for i, h in enumerate(heads) if h >= 0]
    neighbours = [[] for _ in range(n_nodes)]
    for a, b in links:
        neighbours[a].append(b)
        neighbours[b].append(a)
    out = torch.full((n_words, n_words), -1, dtype=torch.long)
    for start in range(n_words):  # breadth-first from every word
        seen = {start: 0}
        frontier = [start]
        while frontier:
            nxt = []
            for u in frontier:
                for v in neighbours[u]:
                    if v not in seen:
                        seen[v] = seen[u] + 1
                        nxt.append(v)
            frontier = nxt
        for v, d in seen.items():
            if v < n_words:
                out[start, v] = d
    return out


def distance_buckets(
    word: Sequence[int], src: torch.Tensor, dst: torch.Tensor, distances: torch.Tensor, num_nodes: int
) -> torch.Tensor:
    """(E,) long: each piece-graph edge's bucket (``DIST_BUCKETS``) from the word distances (``word_distances``).
    ``word[p]``: the word of piece-graph node p (-1 at [CLS] and [SEP]); nodes ``len(word)..num_nodes-1`` are
    extra nodes (bpt's spans, gold phrases), bucketed with [CLS] and [SEP]."""
    of = torch.full((num_nodes,), -1, dtype=torch.long)
    of[: len(word)] = torch.as_tensor(list(word), dtype=torch.long)
    ws, wd = of[src.long()], of[dst.long()]
    special = (ws < 0) | (wd < 0)
    d = distances[ws.clamp(min=0), wd.clamp(min=0)] if len(distances) else torch.zeros_like(ws)
    bucket = d.clamp(max=FAR)
    bucket[d < 0] = UNCONNECTED
    bucket[special] = SPECIAL
    return bucket


def piece_graphs() -> tuple[str, ...]:
    """The registered graph constructions that have a word-level graph to lift (``GraphKind.word_graph``)."""
    return tuple(k.name for k in GRAPH_KINDS.values() if k.word_graph is not None)


def word_edges(
    graph: str | GraphKind,
    n_words: int,
    heads: Sequence[int] | None = None,
    window: int = 2,
    bpt_k: int = 4,
    parent: Sequence[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, int, list[tuple[int, int]]]:
    """The word-level construction ``graph`` over n words (self loops on): ``(src, dst, extra nodes,
    extra nodes' word spans)``, as its registry entry (``data.graphs.GraphKind.word_graph``) makes it.
    ``dep`` needs ``heads`` (-1 at a root); a gold-tree kind (``tree``) takes the gold constituency
    ``parent`` (phrases become extra nodes) or, without it, ``heads``. ``graph``: the name, or its registry
    entry (a :class:`PieceConstruction` passes its ``kind``)."""
    kind = graph if isinstance(graph, GraphKind) else graph_kind(graph)  # an unknown name: one line, the valid ones
    if kind.word_graph is None:
        raise ValueError(
            f"graph={kind.name} is not built on word pieces; valid graphs here: {', '.join(piece_graphs())}"
        )
    return kind.word_graph(n_words, heads, parent, window, bpt_k)  # a kind that reads no gold tree ignores parent


def piece_graph(
    pieces: Pieces,
    graph: str | GraphKind,
    heads: Sequence[int] | None = None,
    window: int = 2,
    bpt_k: int = 4,
    mask_id: int | None = None,
    parent: Sequence[int] | None = None,
) -> dgl.DGLGraph:
    """The DGL graph of one sentence's pieces under the lifted word-level ``graph`` (module docstring).

        Word-level constructions see the words that kept at least one piece after truncation; ``heads``
        of cut words are dropped (a kept word whose head was cut becomes a root), as are gold-tree phrases
    that hold only cut words. ``parent``: the gold constituency tree for ``graph="tree"``."""
    kept = max(pieces.word) + 1 if len(pieces) > 2 else 0  # words are contiguous from 0; truncation cuts the tail
    if heads is not None:
        heads = [h if h < kept else -1 for h in list(heads)[:kept]]
    if parent is not None:
        parent = truncate_tree(parent, pieces.n_words, kept)
    src, dst, n_extra, spans = word_edges(graph, kept, heads, window, bpt_k, parent)
    src, dst = lift_edges(pieces.word, src, dst, kept, n_extra)
    p = len(pieces)
    g = dgl.graph((src, dst), num_nodes=p + n_extra)
    first_piece = {}
    for node, w in enumerate(pieces.word):
        if w >= 0:
            first_piece.setdefault(w, node)
    extra_pos = [min((first_piece[w] for w in range(lo, hi) if w in first_piece), default=0) for lo, hi in spans]
    if n_extra and mask_id is None:
        name = graph.name if isinstance(graph, GraphKind) else graph
        raise ValueError(f"graph={name} adds {n_extra} nodes with no token: pass mask_id (WordPiece.mask_id)")
    g.ndata["tok"] = torch.tensor(pieces.ids + [mask_id] * n_extra, dtype=torch.long)
    g.ndata["pos"] = torch.tensor(list(range(p)) + extra_pos, dtype=torch.long)
    g.ndata["segment"] = torch.zeros(p + n_extra, dtype=torch.long)
    g.ndata["pool"] = torch.cat([torch.ones(p), torch.zeros(n_extra)])
    return g


@dataclass
class PieceConstruction:
    """The graph construction of a model that reads its own WordPiece tokens (``ModelFamily.graphs_on_own_tokens``):
    ``construction(words, heads, gold) -> DGLGraph`` tokenises the sentence's words and lifts the word-level
    graph ``name`` to the pieces (module docstring). ``gold``: the dataset's ``(parent, slot)`` gold tree, read
    by gold-tree kinds (``tree`` on SST). It stands where ``data.graphs.GraphConstruction`` stands in the
    pipeline: ``name``, ``kind``, ``cls_id`` (None: [CLS] is always node 0), ``dynamic``, ``num_nodes`` and
    ``edge_count`` (bounds for the memory plan). The data pipeline hands it words, not vocabulary ids
    (``reads_words``), and gives its nodes no per-node labels (they are pieces, not the treebank's nodes)."""

    name: str
    tokenizer_file: str
    window: int = 2
    k: int = 4
    max_pieces: int = MAX_PIECES
    reads_words: bool = True
    cls_id: None = None
    dynamic: bool = False
    dense_complete: bool = False
    distances: str = "none"  # none | dep | tree: edata["dist"] on every edge (module docstring); in the cache key

    def __post_init__(self):
        valid = ("none", *distance_trees())
        if self.distances not in valid:
            raise ValueError(f"unknown tree for the distance buckets {self.distances!r}; valid: {', '.join(valid)}")
        self._fallback_logged = False
        if self.kind.word_graph is None:  # an unknown name: the registry's one line
            raise ValueError(
                f"graph={self.name} is not built on word pieces; valid graphs here: {', '.join(piece_graphs())}"
            )
        self._wordpiece = None
        # the distances' tree reads the gold tree where there is one (tree), or the dependency parse (dep)
        self._reads_gold = self.distances != "none" and graph_kind(self.distances).gold_tree

    @property
    def kind(self) -> GraphKind:
        """The graph's registry entry: ``GRAPH_KINDS[self.name]``."""
        return graph_kind(self.name)

    @property
    def wordpiece(self) -> WordPiece:
        if self._wordpiece is None:
            self._wordpiece = WordPiece(self.tokenizer_file, self.max_pieces)
        return self._wordpiece

    def __call__(self, words: Sequence[str], heads: Sequence[int] | None = None, gold=None) -> dgl.DGLGraph:
        parent = gold[0] if gold is not None and self.kind.gold_tree else None
        pieces = self.wordpiece.pieces(words)
        g = piece_graph(pieces, self.kind, heads, self.window, self.k, self.wordpiece.mask_id, parent)
        if self.distances != "none":
            g.edata["dist"] = self.buckets(pieces, g, heads, gold)
        return g

    def buckets(self, pieces: Pieces, g: dgl.DGLGraph, heads, gold) -> torch.Tensor:
        """(E,) the distance bucket of every edge of ``g`` in the tree ``distances`` names."""
        reads_gold = self._reads_gold  # tree: the gold tree where there is one
        parent = gold[0] if gold is not None and reads_gold else None
        if reads_gold and parent is None and not self._fallback_logged:
            log.info("no gold tree in this dataset: the tree distances come from the dependency parse (as graph=tree)")
            self._fallback_logged = True
        kept = max(pieces.word) + 1 if len(pieces) > 2 else 0  # the words that kept a piece (as piece_graph)
        if parent is not None:
            parent = truncate_tree(parent, pieces.n_words, kept)
        else:
            if heads is None:
                raise ValueError(
                    f"tree distances (model.structure_bias={self.distances}) need a dependency parse: "
                    "use a text dataset (parsed by spaCy)"
                )
            heads = [h if h < kept else -1 for h in list(heads)[:kept]]
        src, dst = g.edges()
        return distance_buckets(pieces.word, src, dst, word_distances(kept, heads, parent), g.num_nodes())

    def num_nodes(self, n: int) -> int:
        """Bound on the nodes of an n-word sentence: 2 pieces a word, [CLS], [SEP], n extra nodes."""
        return min(self.max_pieces, 2 * n + 2) + (n if self.kind.adds_nodes or self.kind.gold_tree else 0)

    def edge_count(self, n: int) -> int:
        return self.num_nodes(n) ** 2  # a bound: at most every pair
