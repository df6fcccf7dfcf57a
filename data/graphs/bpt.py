"""``graph=bpt``: the binary-partition graph of BP-Transformer (Ye et al., 2019).

A *span* node (``pos = -1``, token ``<phrase>``) for every block of a binary partition of the tokens, each span
hearing its tokens, each token hearing its ``k`` nearest tokens and then ``k`` ever larger spans per level on
each side: O(k·n·log n) edges instead of n^2 (``bpt_edges``; ``conf/graph/bpt.yaml`` sets ``k``). On word
pieces: the partition of the words, its spans as extra nodes.
"""

from __future__ import annotations

import torch

from data.graphs.edges import FROM_CHILD, FROM_LEFT, FROM_RIGHT, SELF
from data.graphs.registry import Built, GraphKind, register_graph


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
        for senders, side in ((_left_senders(i, n, k, block), FROM_LEFT), (_right_senders(i, n, k, block), FROM_RIGHT)):
            src += senders
            dst += [i] * len(senders)
            etype += [side] * len(senders)
    src, dst, etype = (torch.tensor(x, dtype=torch.long) for x in (src, dst, etype))
    if self_loops:
        loop = torch.arange(n + len(spans))
        src, dst = torch.cat([src, loop]), torch.cat([dst, loop])
        etype = torch.cat([etype, torch.full_like(loop, SELF)])
    return src, dst, etype, len(spans)


def _left_senders(i: int, n: int, k: int, block) -> list[int]:
    """Token i's contextual senders on its left: k tokens, then up to k blocks per level going out."""
    senders = list(range(max(0, i - k), i))  # level 0
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
    return senders


def _right_senders(i: int, n: int, k: int, block) -> list[int]:
    """Token i's contextual senders on its right, as :func:`_left_senders` on the other side."""
    senders = list(range(i + 1, min(n, i + 1 + k)))  # level 0
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
    return senders


def build(c, n: int, heads, tree) -> Built:
    src, dst, etype, extra = bpt_edges(n, c.k, c.self_loops)
    return Built(src, dst, etype, extra=extra, root=n + extra - 1)  # the span of the whole sentence


def words(n: int, heads, parent, window: int, k: int):
    src, dst, _, n_spans = bpt_edges(n, k=k)
    return src, dst, n_spans, bpt_spans(n)


def check(c) -> None:
    if c.pe is not None:
        raise ValueError(
            f"model.positional={c.pe} is not defined on graph={c.name}'s span nodes; "
            "use model.positional=sinusoidal or none"
        )


KIND = register_graph(
    GraphKind(
        "bpt",
        build,
        "BP-Transformer's binary partition: span nodes, O(k n log n) edges",
        adds_nodes=True,
        check=check,
        word_graph=words,
    )
)
