"""The graph cache: a split's built graphs on disk (``data/cache.py``: checked, atomic), as the flat arrays of
:func:`data.batches.pack_graphs`, keyed by the split's content (its fingerprint), the construction's fields and
the vocabulary. A later run reads them back as :class:`data.batches.PackedGraphs`: each graph is made from its
slice the first time a batch asks for it, the same graph (edges in the same order, the same node and edge data)
as building it again.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import os
from collections.abc import Callable
from pathlib import Path

import dgl
import torch

from data import cache
from data.batches import PackedGraphs, pack_graphs
from data.vocab import Vocab

log = logging.getLogger(__name__)

GRAPHS_FORMAT = 3  # the graph cache's layout (pack_graphs); 1 was dgl.save_graphs
LAP_PE_BASIS = (
    "canonical-eigenspaces"  # in lap_pe graphs' cache keys only (data/graphs/positional.py); other keys unchanged
)


def graph_cache_path(cache_dir: str | os.PathLike, desc: str, fingerprint: str, construction, vocab: Vocab) -> Path:
    """Where the graphs of a split (``fingerprint``: its content, ``desc``: its name) built by ``construction`` over
    ``vocab`` are cached: the key is the format, the fingerprint, the construction's fields and the vocabulary."""
    spec = dataclasses.asdict(construction)
    parts = (GRAPHS_FORMAT, fingerprint, spec, vocab.to_list())
    if spec.get("pe") == "lap_pe":  # graphs cached before its repeated eigenspaces had a fixed basis: rebuilt
        parts += (LAP_PE_BASIS,)
    key = cache.key_digest(*parts)
    return Path(cache_dir) / "graphs" / f"{desc or 'split'}-{key}.bin"


def write_graphs(path: Path, graphs: list[dgl.DGLGraph], unknown_share: Callable[[], float]) -> None:
    """The graphs, packed, and the split's share of unknown tokens, written to ``path``; graphs with differing
    data keys are not cached."""
    packed = pack_graphs(graphs)
    if packed is not None:
        buffer = io.BytesIO()
        torch.save({"graphs": packed, "unknown_share": unknown_share()}, buffer)
        cache.write(path, buffer.getvalue())


def read_graphs(path: Path, expected: int) -> tuple:
    """``(graphs, unknown share)`` from the cache, or ``(None, None)`` when it is absent or damaged (one
    warning) or holds another number of graphs: they are built again."""
    payload = cache.read(path, "graph")
    if payload is None:
        return None, None
    try:
        stored = torch.load(io.BytesIO(payload), weights_only=True)
        graphs = PackedGraphs(stored["graphs"])
    except Exception as e:  # a valid checksum over an unreadable payload: another version's format
        log.warning("graph cache %s unreadable (%s): building the graphs again", path, str(e).splitlines()[0])
        return None, None
    if len(graphs) != expected:
        log.warning("graph cache %s holds %d graphs, expected %d: building again", path, len(graphs), expected)
        return None, None
    return graphs, float(stored["unknown_share"])
