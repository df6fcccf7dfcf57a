"""From config to batches: splits (HF ``datasets``) -> vocabulary -> one graph per sentence -> ``dgl.batch``.

Graphs are built once per run, when the split is loaded, and reused every epoch; only the kNN
construction adds edges later, in the model's forward pass.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import json
import logging
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import datasets
import dgl
import torch
from torch.utils.data import Dataset
from tqdm.auto import tqdm

from data import cache
from data.datasets import dataset_entry, dataset_names
from data.graphs import GraphConstruction, make_construction  # noqa: F401  (make_construction: re-exported)
from data.listops import describe_example  # noqa: F401  (re-exported: evaluate.py and the tools read it here)
from data.vocab import Vocab

log = logging.getLogger(__name__)
datasets.disable_progress_bars()  # our own bars say what is happening


def load_splits(cfg: Mapping, progress: bool = True) -> dict[str, datasets.Dataset]:
    """``{"train"|"val"|"test": Dataset}`` with columns tokens, label, heads, depth, length, group: read by the
    dataset's registry entry (``data/datasets.py``)."""
    return dataset_entry(cfg["name"]).load_splits(cfg, progress)


def with_defaults(cfg: Mapping) -> dict:
    """A dataset config with the keys added after it was written filled in as :func:`load_splits` reads
    them, so a checkpoint from before a key existed compares equal to the config that remakes its data."""
    entry = dataset_entry(cfg["name"]) if cfg.get("name") in dataset_names() else None
    return entry.upgrade(cfg) if entry is not None and entry.upgrade else dict(cfg)


def column(ds: datasets.Dataset, name: str) -> list:
    """One column as a list, converted by Arrow in one go (``ds[name]`` formats it row by row)."""
    return ds.with_format("arrow")[name].to_pylist()


def token_counts(ds: datasets.Dataset, name: str = "tokens") -> Counter:
    """How often each token occurs in the split: the counts :meth:`Vocab.build` makes, counted by Arrow."""
    import pyarrow.compute as pc

    counted = pc.value_counts(pc.list_flatten(ds.with_format("arrow")[name]))
    return Counter(dict(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist())))


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


class GraphDataset(Dataset):
    """The graphs of one split, with labels and the per-example breakdown fields.

    Built once when the split is loaded, or, with ``lazy=True``, each time a batch asks for them: the
    complete graph of a 2,000-token expression is 4M edges (64 MB of indices), so a split of long
    expressions cannot hold all its graphs at once.

    With ``cache_dir`` the built graphs are written to disk (``data/cache.py``: checked, atomic), keyed by the
    split's content (its fingerprint), the construction and the vocabulary, and a later run reads them back
    as flat arrays: each graph is made from its slice the first time a batch asks for it, the same graph
    (edges in the same order, the same node and edge data) as building it again.
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
            spec = dataclasses.asdict(construction)
            parts = (GRAPHS_FORMAT, ds._fingerprint, spec, vocab.to_list())
            if spec.get("pe") == "lap_pe":  # graphs cached before its repeated eigenspaces had a fixed basis: rebuilt
                parts += (LAP_PE_BASIS,)
            key = cache.key_digest(*parts)
            path = Path(cache_dir) / "graphs" / f"{desc or 'split'}-{key}.bin"
        self.cache_path = path
        self.graphs, share = self._load_cached(path, len(ds)) if path is not None else (None, None)
        if self.graphs is None and not lazy:
            self.graphs = [
                self.build(i)
                for i in tqdm(range(len(ds)), desc=f"graphs {desc}".strip(), leave=False, disable=not progress)
            ]
            if path is not None:
                packed = pack_graphs(self.graphs)
                if packed is not None:  # graphs with differing data keys are not cached
                    buffer = io.BytesIO()
                    torch.save({"graphs": packed, "unknown_share": self.unknown_share}, buffer)
                    cache.write(path, buffer.getvalue())
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
        digest = hashlib.sha256()
        for tokens, label in zip(column(self._ds, "tokens"), self.labels.tolist()):
            digest.update(json.dumps([tokens, label], separators=(",", ":")).encode())
            pass
        return digest.hexdigest()[:16]

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

    @staticmethod
    def _load_cached(path: Path, expected: int) -> tuple:
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

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return (self.graphs[i] if self.graphs is not None else self.build(i)), self.labels[i]


GRAPHS_FORMAT = 3  # the graph cache's layout (pack_graphs); 1 was dgl.save_graphs
LAP_PE_BASIS = (
    "canonical-eigenspaces"  # in lap_pe graphs' cache keys only (data/graphs/positional.py); other keys unchanged
)


def pack_graphs(graphs: list[dgl.DGLGraph]) -> dict | None:
    """The graphs of a split as flat tensors: node and edge counts, every graph's edges (local ids, int32)
    and node and edge data, back to back. None when the graphs do not share their data keys and dtypes."""
    if not graphs:
        return None
    first = graphs[0]
    nkeys, ekeys = sorted(first.ndata.keys()), sorted(first.edata.keys())
    for g in graphs:
        if sorted(g.ndata.keys()) != nkeys or sorted(g.edata.keys()) != ekeys or g.idtype != first.idtype:
            return None
    edges = [g.edges() for g in graphs]
    ndata = {k: torch.cat([g.ndata[k] for g in graphs]) for k in nkeys}
    edata = {k: torch.cat([g.edata[k] for g in graphs]) for k in ekeys}
    return {
        "idtype": str(first.idtype).removeprefix("torch."),
        "nodes": torch.tensor([g.num_nodes() for g in graphs], dtype=torch.long),
        "edges": torch.tensor([g.num_edges() for g in graphs], dtype=torch.long),
        "src": _narrow(torch.cat([s for s, _ in edges])),  # local ids: int16 for graphs under 32k nodes
        "dst": _narrow(torch.cat([d for _, d in edges])),
        "ndata": {k: _narrow(v) for k, v in ndata.items()},
        "edata": {k: _narrow(v) for k, v in edata.items()},
        "dtypes": {
            f"{where}/{k}": str(v.dtype).removeprefix("torch.")
            for where, d in (("n", ndata), ("e", edata))
            for k, v in d.items()
        },
    }


def _narrow(x: torch.Tensor) -> torch.Tensor:
    """An integer tensor in the smallest integer type that holds its values exactly (cast back on reading)."""
    if x.dtype not in (torch.int64, torch.int32) or not len(x):
        return x
    low, high = int(x.min()), int(x.max())
    for dtype in (torch.int8, torch.int16, torch.int32):
        info = torch.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return x.to(dtype)
    return x


class PackedGraphs:
    """A list of graphs read from :func:`pack_graphs`' tensors: graph i is made from its slices the first
    time it is asked for, then kept (so the data is ready at once, and each graph is made once)."""

    def __init__(self, packed: dict):
        self.packed, self.idtype = packed, getattr(torch, packed["idtype"])
        self.dtypes = {k: getattr(torch, v) for k, v in packed["dtypes"].items()}  # each data key's own dtype
        nodes, edges = packed["nodes"], packed["edges"]
        num_nodes, num_edges = int(nodes.sum()), int(edges.sum())
        if len(edges) != len(nodes) or any(len(v) != num_nodes for v in packed["ndata"].values()):
            raise ValueError("node counts do not match the node data")
        if any(len(v) != num_edges for v in (packed["src"], packed["dst"], *packed["edata"].values())):
            raise ValueError("edge counts do not match the edges")
        zero = torch.zeros(1, dtype=torch.long)
        self.node_start = torch.cat([zero, nodes.cumsum(0)]).tolist()
        self.edge_start = torch.cat([zero, edges.cumsum(0)]).tolist()
        self._graphs: list = [None] * len(nodes)

    def __len__(self) -> int:
        return len(self._graphs)

    def num_nodes(self) -> list[int]:
        return self.packed["nodes"].tolist()

    def __getitem__(self, i: int) -> dgl.DGLGraph:
        g = self._graphs[i]
        if g is None:
            g = self._graphs[i] = self._make(i)
        return g

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def batch(self, indices: list[int]) -> dgl.DGLGraph:
        """The batched graph of ``indices`` made straight from the arrays, in one ``dgl.graph`` call: equal to
        ``dgl.batch([self[i] for i in indices])`` without making the graphs one by one (what
        :class:`Batches` serves when a split's graphs came from the cache)."""
        p, ns, es = self.packed, self.node_start, self.edge_start
        nodes = [ns[i + 1] - ns[i] for i in indices]
        edges = [es[i + 1] - es[i] for i in indices]
        offsets = torch.tensor([0, *nodes[:-1]], dtype=torch.long).cumsum(0).repeat_interleave(torch.tensor(edges))
        node_rows = torch.cat([torch.arange(ns[i], ns[i + 1]) for i in indices])
        edge_rows = torch.cat([torch.arange(es[i], es[i + 1]) for i in indices])
        src = p["src"][edge_rows].to(self.idtype) + offsets
        dst = p["dst"][edge_rows].to(self.idtype) + offsets
        g = dgl.graph((src, dst), num_nodes=sum(nodes), idtype=self.idtype)
        for k, v in p["ndata"].items():
            g.ndata[k] = v[node_rows].to(self.dtypes[f"n/{k}"])
        for k, v in p["edata"].items():
            g.edata[k] = v[edge_rows].to(self.dtypes[f"e/{k}"])
        g.set_batch_num_nodes(torch.tensor(nodes, dtype=self.idtype))
        g.set_batch_num_edges(torch.tensor(edges, dtype=self.idtype))
        return g

    def _make(self, i: int) -> dgl.DGLGraph:
        p = self.packed
        n0, n1 = self.node_start[i], self.node_start[i + 1]
        e0, e1 = self.edge_start[i], self.edge_start[i + 1]
        g = dgl.graph(
            (p["src"][e0:e1].to(self.idtype), p["dst"][e0:e1].to(self.idtype)), num_nodes=n1 - n0, idtype=self.idtype
        )
        for k, v in p["ndata"].items():
            g.ndata[k] = v[n0:n1].to(self.dtypes[f"n/{k}"])
        for k, v in p["edata"].items():
            g.edata[k] = v[e0:e1].to(self.dtypes[f"e/{k}"])
        return g


def collate(batch):
    graphs, labels = zip(*batch)
    return dgl.batch(graphs), torch.stack(labels)


class TrainBatches(torch.utils.data.Sampler):
    """Training batches in a new random order every epoch, fixed by the seed.

    ``bucket``: shuffle, sort pools of ``pool`` batches by length, cut them into batches, shuffle
    the batches, so a padded (dense) batch holds little padding; message passing does not care.
    ``rank``/``world``: each of ``world`` processes takes every world-th batch (the list is
    padded by repetition so all take the same number, as DDP needs).
    """

    def __init__(
        self,
        lengths: list[int],
        batch_size: int,
        seed: int = 0,
        bucket: bool = True,
        pool: int = 50,
        rank: int = 0,
        world: int = 1,
    ):
        self.lengths, self.batch_size, self.bucket, self.pool = torch.tensor(lengths), batch_size, bucket, pool
        self.rank, self.world = rank, world
        self.generator = torch.Generator().manual_seed(seed)

    def _num_batches(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def __iter__(self):
        order = torch.randperm(len(self.lengths), generator=self.generator)
        size = self.batch_size * self.pool if self.bucket else len(order)
        batches = []
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            if self.bucket:
                chunk = chunk[torch.argsort(self.lengths[chunk], stable=True)]
            batches += [chunk[i : i + self.batch_size].tolist() for i in range(0, len(chunk), self.batch_size)]
        if self.bucket:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=self.generator).tolist()]
        batches += batches[: len(self) * self.world - len(batches)]  # equal shares for every process
        yield from batches[self.rank :: self.world]

    def __len__(self) -> int:
        n = (
            self._num_batches()
            if not self.bucket
            else sum(
                -(-min(self.batch_size * self.pool, len(self.lengths) - s) // self.batch_size)
                for s in range(0, len(self.lengths), self.batch_size * self.pool)
            )
        )
        return -(-n // self.world)


class Batches:
    """Batches of ``(graph, labels)`` for a loop: ``collate`` of the dataset's examples, in the order ``batch_sampler``
    gives (an iterable of index lists), as torch's DataLoader (no workers) makes them, with two ways to keep the
    collating off a GPU's hot path:

    * ``keep``: the batches of the first pass are kept and served again (evaluation: a fixed order);
    * ``prefetch``: a thread collates up to that many batches ahead while the model computes (and, with
      ``pin``, into pinned memory, so the copy to the GPU can be asynchronous).

    Each pass draws one number from torch's global generator, as a DataLoader's iterator does, so a run's
    dropout masks (and every committed number) are what they were with DataLoaders.
    """

    def __init__(self, ds, batch_sampler, keep: bool = False, prefetch: int = 0, pin: bool = False):
        self.dataset, self.batch_sampler, self.keep, self.prefetch, self.pin = ds, batch_sampler, keep, prefetch, pin
        self.kept: list | None = None

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def make(self, indices) -> tuple[dgl.DGLGraph, torch.Tensor]:
        graphs = getattr(self.dataset, "graphs", None)
        if isinstance(graphs, PackedGraphs):  # read from the cache: one graph straight from the arrays
            g, y = graphs.batch(list(indices)), self.dataset.labels[list(indices)]
        else:
            g, y = collate([self.dataset[i] for i in indices])
        if self.pin:  # the labels; graphs stay as they are (PyPI's DGL cannot pin, and keeps them on the CPU)
            y = y.pin_memory()
        return g, y

    def __iter__(self):
        torch.empty((), dtype=torch.int64).random_()  # what DataLoader.__iter__ draws: the RNG stream stays put
        if self.kept is not None:
            return iter(self.kept)
        made = self._made()
        if not self.keep:
            return made
        return self._keeping(made)

    def _keeping(self, made):
        batches = []
        for batch in made:
            batches.append(batch)
            yield batch
        self.kept = batches

    def _made(self):
        if self.prefetch <= 0:
            return (self.make(indices) for indices in self.batch_sampler)
        return _ahead(map(self.make, self.batch_sampler), self.prefetch)


def _ahead(items, depth: int):
    """``items``, computed by a thread up to ``depth`` ahead of the consumer (its errors re-raised here)."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    done, stop = object(), threading.Event()

    def put(item) -> bool:  # False once the consumer has gone
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in items:
                if not put(item):
                    return
            put(done)
        except BaseException as e:  # handed to the consumer
            put(e)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def make_loader(
    ds: GraphDataset,
    batch_size: int,
    shuffle: bool,
    seed: int = 0,
    bucket: bool = False,
    rank: int = 0,
    world: int = 1,
    keep: bool = False,
    prefetch: int = 0,
    pin: bool = False,
) -> Batches:
    """Batches of graphs (:class:`Batches`). Training (``shuffle``) uses :class:`TrainBatches`; evaluation keeps
    dataset order (``keep``: collated once, served every epoch). ``loader.rng`` is the generator that orders
    the training batches (saved for resume). ``prefetch``/``pin``: collate ahead in a thread, into pinned memory."""
    if shuffle:
        sampler = TrainBatches(ds.sizes, batch_size, seed, bucket, rank=rank, world=world)
        loader = Batches(ds, sampler, prefetch=prefetch, pin=pin)
        loader.rng = sampler.generator
        return loader
    order = [list(range(i, min(i + batch_size, len(ds)))) for i in range(0, len(ds), batch_size)]
    return Batches(ds, order, keep=keep, prefetch=prefetch, pin=pin)


def num_classes_of(cfg: Mapping, splits: dict, entry=None) -> int:
    """The dataset's fixed number of classes, else ``cfg``'s ``num_classes``, else the largest label + 1
    (``entry``: the dataset's registry entry, when the caller has it)."""
    fixed = (entry or dataset_entry(cfg["name"])).num_classes
    if fixed is not None:
        return fixed
    return int(cfg.get("num_classes") or max(max(ds["label"]) for ds in splits.values()) + 1)
