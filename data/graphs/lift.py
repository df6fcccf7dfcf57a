"""The WordPiece lifting rule: a word-level graph becomes a graph over a sentence's word pieces.

A pretrained model (``models/minilm.py``) reads ``[CLS] pieces... [SEP]``; a construction that can be built on
its pieces declares a word-level graph (``GraphKind.word_graph``), and :func:`lift_edges` lifts it by one rule:

  1. **the pieces of one word are linked to each other** (every ordered pair, each piece to itself
     included), so a word is never cut apart by the graph;
  2. **each piece inherits its word's edges**: a word edge ``u -> v`` becomes every piece of u -> every
     piece of v;
  3. **[CLS] and [SEP] are global nodes**: they send to and receive from every node, themselves and each
     other included.

Nodes that are not words (the span nodes of ``bpt``, the phrase nodes of a gold constituency tree) stay
single nodes. ``data/wordpiece.py`` tokenises the words and assembles the piece graph; the word-level gold
constituency tree (:func:`constituency_edges`) lives here too, since ``tree``'s word graph is built from it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def lift_edges(
    word: Sequence[int], src: torch.Tensor, dst: torch.Tensor, n_words: int, n_extra: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Word-level edges -> piece-level edges, by the module's rule.

    ``word[p]``: the word of node p of the piece graph (-1 at [CLS] and [SEP]; length P). Word-level
    nodes are ``0..n_words-1`` (words) then ``n_words..n_words+n_extra-1`` (extra nodes such as bpt's
    spans), which become piece-graph nodes ``P..P+n_extra-1``. Returns ``(src, dst)`` sorted by
    (dst, src), each edge once.
    """
    word = torch.as_tensor(list(word), dtype=torch.long)
    p, w = len(word), n_words + n_extra
    # member[x, u] = 1: piece-graph node x stands for word-level node u (pieces of word u, or extra node u)
    member = torch.zeros(p + n_extra, w)
    is_piece = word >= 0
    member[torch.arange(p)[is_piece], word[is_piece]] = 1.0
    member[torch.arange(p, p + n_extra), torch.arange(n_words, w)] = 1.0
    word_adj = torch.zeros(w, w)
    word_adj[src.long(), dst.long()] = 1.0  # word_adj[u, v] = 1: u -> v
    same_word = member @ member.T  # rule 1 (and every extra node to itself)
    inherited = member @ word_adj @ member.T  # rule 2: piece of u -> piece of v for every u -> v
    adj = (same_word + inherited) > 0
    special = torch.cat([~is_piece, torch.zeros(n_extra, dtype=torch.bool)])
    adj[special, :] = True  # rule 3: [CLS] and [SEP] send to every node ...
    adj[:, special] = True  # ... and receive from every node
    dst_idx, src_idx = adj.T.nonzero(as_tuple=True)  # ordered by dst, then src
    return src_idx, dst_idx


def phrase_spans(parent: Sequence[int], n_words: int) -> list[tuple[int, int]]:
    """The word span ``[lo, hi)`` of each phrase node ``n_words..len(parent)-1`` of a constituency tree."""
    n_phrases = len(parent) - n_words
    lo, hi = [n_words] * n_phrases, [-1] * n_phrases
    for node in range(
        len(parent)
    ):  # children come before parents, so a phrase's span is final before its parent reads it
        p = parent[node]
        if p < 0:
            continue
        if not n_words <= p < len(parent) or p <= node:
            raise ValueError(f"parent[{node}] = {p}: a node's parent must be a later phrase node (>= {n_words})")
        a, b = (node, node + 1) if node < n_words else (lo[node - n_words], hi[node - n_words])
        lo[p - n_words], hi[p - n_words] = min(lo[p - n_words], a), max(hi[p - n_words], b)
    if any(h < 0 for h in hi):
        raise ValueError("a phrase node with no children in parent: not a constituency tree")
    return list(zip(lo, hi))


def constituency_edges(
    parent: Sequence[int], n_words: int
) -> tuple[torch.Tensor, torch.Tensor, int, list[tuple[int, int]]]:
    """Gold constituency tree over words (nodes 0..n-1) and phrases (n..): each node linked both ways to
    its parent, self loops on the words (lift_edges gives the phrases theirs); with the phrase spans."""
    if len(parent) < n_words:
        raise ValueError(f"graph=tree: parent has {len(parent)} nodes, fewer than the {n_words} words")
    spans = phrase_spans(parent, n_words)
    child = [i for i, p in enumerate(parent) if p >= 0]
    par = [parent[i] for i in child]
    loops = list(range(n_words))
    src = torch.tensor(child + par + loops, dtype=torch.long)
    dst = torch.tensor(par + child + loops, dtype=torch.long)
    return src, dst, len(parent) - n_words, spans
