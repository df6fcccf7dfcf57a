"""The graphs of one split: :class:`GraphDataset` (built once, read from the graph cache, or built per batch),
its per-node labels and its fingerprint."""

from __future__ import annotations

import functools
import hashlib
import json
import os

import datasets
import dgl
import torch
from torch.utils.data import Dataset
from tqdm.auto import tqdm

from data.batches import PackedGraphs
from data.graph_cache import graph_cache_path, read_graphs, write_graphs
from data.graphs import GraphConstruction
from data.splits import column
from data.vocab import Vocab


def node_labels(
    num_nodes: int, num_tokens: int, labels: list[int], has_cls: bool, phrases: bool = True
) -> torch.Tensor:
    """(N,) the label of each node of a graph: the tokens' labels, then, when the graph's extra nodes are the
    treebank's phrases (``phrases``: a gold-tree construction numbers them as the treebank does), the
    phrases'. -1 for a node with none: the ``<cls>`` node, which comes last; a neutral phrase of binary
    SST; a node that is no phrase of the treebank (graph=bpt's spans)."""
    labelled = num_nodes - int(has_cls)  # tokens, and phrases if the graph has them
    if phrases and labelled not in (num_tokens, len(labels)):
        raise ValueError(f"a graph of {num_nodes} nodes for {num_tokens} tokens and {len(labels)} labelled nodes")
    out = torch.full((num_nodes,), -1, dtype=torch.long)
    known = labelled if phrases else num_tokens
    out[:known] = torch.tensor(labels[:known], dtype=torch.long)
    return out


def split_fingerprint(tokens, labels) -> str:
    """What a split holds, in its order: the first 16 hex digits of a sha256 over every example's tokens and
    label (``GraphDataset.fingerprint``, kept with each run's test predictions). A split made again by other
    code (``studies.long_range.chance``) is the one a run scored only when this matches."""
    digest = hashlib.sha256()
    for example_tokens, label in zip(tokens, labels):
        digest.update(json.dumps([example_tokens, int(label)], separators=(",", ":")).encode())
    return digest.hexdigest()[:16]


class GraphDataset(Dataset):
    """The graphs of one split, with labels and the per-example breakdown fields.

    Built once when the split is loaded, or, with ``lazy=True``, each time a batch asks for them: the
    complete graph of a 2,000-token expression is 4M edges (64 MB of indices), so a split of long
    expressions cannot hold all its graphs at once.

    With ``cache_dir`` the built graphs are written to disk and read back by a later run (``data/graph_cache.py``:
    keyed by the split's content, its fingerprint, the construction and the vocabulary).
    """

    def __init__(
        self,
        ds: datasets.Dataset,
        vocab: Vocab,
        construction: GraphConstruction,
        desc: str = "",
        progress: bool = True,
        cache_dir: str | os.PathLike | None = None,
        lazy: bool = False,
    ):
        self._ds, self._vocab, self.construction = ds, vocab, construction
        path = None
        if cache_dir and not lazy:  # keyed by the split's content, the construction and the vocabulary
            path = graph_cache_path(cache_dir, desc, ds._fingerprint, construction, vocab)
        self.cache_path = path
        self.graphs, share = read_graphs(path, len(ds)) if path is not None else (None, None)
        if self.graphs is None and not lazy:
            self.graphs = [
                self.build(i)
                for i in tqdm(range(len(ds)), desc=f"graphs {desc}".strip(), leave=False, disable=not progress)
            ]
            if path is not None:
                write_graphs(path, self.graphs, lambda: self.unknown_share)
        elif share is not None:
            self.unknown_share = share
        # what a batch sampler sorts by: node counts, or (lazy) token counts
        if self.graphs is None:
            self.sizes = [len(i) for i in self.ids]
        else:
            packed = isinstance(self.graphs, PackedGraphs)
            self.sizes = self.graphs.num_nodes() if packed else [g.num_nodes() for g in self.graphs]
        self.labels = torch.tensor(column(ds, "label"), dtype=torch.long)
        self.meta = {k: column(ds, k) for k in ("depth", "length", "group") if k in ds.column_names}

    @functools.cached_property
    def fingerprint(self) -> str:
        """What the split holds, in its order: the first 16 hex digits of a sha256 over every example's tokens
        and label. Two runs' per-example test predictions compare example by example only when it matches."""
        return split_fingerprint(column(self._ds, "tokens"), self.labels.tolist())

    @functools.cached_property
    def _encoded(self) -> datasets.Dataset:
        vocab = self._vocab
        return self._ds.map(lambda ex: {"ids": vocab.encode(ex["tokens"])})

    @functools.cached_property
    def ids(self) -> list:
        # a construction on a model's own tokens (data.wordpiece.PieceConstruction) tokenises the words itself
        reads_words = getattr(self.construction, "reads_words", False)
        return column(self._encoded, "tokens" if reads_words else "ids")

    @functools.cached_property
    def heads(self) -> list:
        return column(self._encoded, "heads") if "heads" in self._ds.column_names else [None] * len(self._ds)

    @functools.cached_property
    def gold(self) -> list:
        cols = self._ds.column_names
        if "parent" not in cols:
            return [None] * len(self._ds)
        return list(zip(column(self._encoded, "parent"), column(self._encoded, "slot")))

    @functools.cached_property
    def node_labels(self) -> list | None:
        has_labels = "node_labels" in self._ds.column_names and not getattr(self.construction, "reads_words", False)
        return column(self._encoded, "node_labels") if has_labels else None  # word pieces are not the treebank's nodes

    @functools.cached_property
    def unknown_share(self) -> float:
        unk, ids = self._vocab.stoi["<unk>"], column(self._encoded, "ids")
        return sum(i == unk for row in ids for i in row) / max(1, sum(len(row) for row in ids))

    def build(self, i: int) -> dgl.DGLGraph:
        """The graph of example i."""
        g = self.construction(self.ids[i], self.heads[i], self.gold[i])
        if self.node_labels is not None:  # SST: the sentiment of every word and phrase the graph has a node for
            c = self.construction
            phrases = c.kind.is_tree  # extra nodes of another kind (bpt's spans) have no label
            g.ndata["label"] = node_labels(
                g.num_nodes(), len(self.ids[i]), self.node_labels[i], c.cls_id is not None, phrases
            )
        return g

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return (self.graphs[i] if self.graphs is not None else self.build(i)), self.labels[i]
