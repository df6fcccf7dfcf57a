"""``graph=window``: every token receives from the tokens at most ``window`` positions away (a
convolution / local attention; ``conf/graph/window.yaml`` sets ``window``). On word pieces: a window of words.
"""

from __future__ import annotations

from data.graphs.edges import window_edges
from data.graphs.registry import Built, GraphKind, register_graph


def build(c, n: int, heads, tree) -> Built:
    return Built(*window_edges(n, c.window, c.self_loops))


def words(n: int, heads, parent, window: int, k: int):
    return (*window_edges(n, window), 0, [])


KIND = register_graph(
    GraphKind(
        "window",
        build,
        "every token receives from the tokens at most `window` positions away",
        word_graph=words,
    )
)
