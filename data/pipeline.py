"""From config to batches: splits (HF ``datasets``) -> vocabulary -> one graph per sentence -> ``dgl.batch``.

Graphs are built once per run, when the split is loaded, and reused every epoch; only the kNN
construction adds edges later, in the model's forward pass.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

import datasets
import dgl
import torch
from torch.utils.data import Dataset
from tqdm.auto import tqdm

from data.datasets import dataset_entry, dataset_names
from data.graphs import STRUCTURAL_PE, GraphConstruction, graph_kind
from data.listops import describe_example  # noqa: F401  (re-exported: evaluate.py and the tools read it here)
from data.vocab import PHRASE, Vocab

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


MODEL_SETTINGS = ("cls_id", "phrase_id", "pe", "pe_dim", "pe_graph")  # set from the model and vocabulary below


def make_construction(graph_cfg: Mapping, vocab: Vocab, model_cfg: Mapping) -> GraphConstruction:
    """The graph construction for ``graph_cfg``, with what the model needs on its graphs
    (a ``<cls>`` node for ``readout=cls``; ``ndata['pe']`` for a structural positional encoding).
    Graphs over words; ``models.make_construction`` asks a family that builds its graphs on its own tokens
    (a pretrained model's word pieces) for its own construction first."""
    name = graph_cfg["name"]
    kind = graph_kind(name)
    positional = model_cfg.get("positional", "none")
    # the graph's own settings (self_loops, window, k, ... : GraphConstruction's fields), as its YAML sets them
    settings = {
        f.name: type(f.default)(graph_cfg[f.name])
        for f in dataclasses.fields(GraphConstruction)
        if f.name in graph_cfg and f.name not in MODEL_SETTINGS and isinstance(f.default, bool | int | float | str)
    }
    return GraphConstruction(
        **settings,
        cls_id=vocab.cls_id if model_cfg.get("readout", "mean") == "cls" else None,
        # phrase nodes (binary_tree; tree on a gold constituency tree) are <phrase> tokens; vocabularies
        # saved before <phrase> existed cannot read binary_tree, and never met a gold tree
        **({"phrase_id": vocab.phrase_id} if kind.adds_nodes or PHRASE in vocab.stoi else {}),
        pe=positional if positional in STRUCTURAL_PE else None,
        pe_dim=int(model_cfg.get("pe_dim", 8)),
        pe_graph=model_cfg.get("pe_graph", "tree"),
    )


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

    Built once when the split is loaded (and cached on disk with ``cache_dir``), or, with ``lazy=True``,
    each time a batch asks for them: the complete graph of a 2,000-token expression is 4M edges
    (64 MB of indices), so a split of long expressions cannot hold all its graphs at once.
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
        encoded = ds.map(lambda ex: {"ids": vocab.encode(ex["tokens"])})
        cols = encoded.column_names
        # a construction on a model's own tokens (data.wordpiece.PieceConstruction) tokenises the words itself
        reads_words = getattr(construction, "reads_words", False)
        self.construction, self.ids = construction, encoded["tokens" if reads_words else "ids"]
        self.heads = encoded["heads"] if "heads" in cols else [None] * len(encoded)
        self.gold = list(zip(encoded["parent"], encoded["slot"])) if "parent" in cols else [None] * len(encoded)
        has_labels = "node_labels" in cols and not reads_words  # word pieces are not the treebank's nodes
        self.node_labels = encoded["node_labels"] if has_labels else None
        path = None
        if cache_dir and not lazy:  # keyed by the split's content, the construction and the vocabulary
            key = json.dumps([ds._fingerprint, dataclasses.asdict(construction), vocab.to_list()], sort_keys=True)
            path = Path(cache_dir) / "graphs" / f"{desc or 'split'}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.bin"
        self.cache_path = path
        self.graphs = self._load_cached(path, len(encoded)) if path is not None and path.is_file() else None
        if self.graphs is None and not lazy:
            self.graphs = [
                self.build(i)
                for i in tqdm(range(len(encoded)), desc=f"graphs {desc}".strip(), leave=False, disable=not progress)
            ]
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(path.name + ".tmp")
                dgl.save_graphs(str(tmp), self.graphs)
                os.replace(tmp, path)
        # what a batch sampler sorts by: node counts, or (lazy) token counts
        self.sizes = [g.num_nodes() for g in self.graphs] if self.graphs is not None else [len(i) for i in self.ids]
        self.labels = torch.tensor(encoded["label"], dtype=torch.long)
        self.meta = {k: encoded[k] for k in ("depth", "length", "group") if k in encoded.column_names}
        self.unknown_share = sum(i == vocab.stoi["<unk>"] for ids in encoded["ids"] for i in ids) / max(
            1, sum(len(ids) for ids in encoded["ids"])
        )

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
    def _load_cached(path: Path, expected: int) -> list | None:
        """The cached graphs, or None (and a warning) if the file is damaged or stale: they are rebuilt."""
        try:
            graphs, _ = dgl.load_graphs(str(path))
        except Exception as e:
            log.warning("graph cache %s unreadable (%s): building the graphs again", path, str(e).splitlines()[0])
            return None
        if len(graphs) != expected:
            log.warning("graph cache %s holds %d graphs, expected %d: building again", path, len(graphs), expected)
            return None
        for g in graphs:
            if "root" in g.ndata:  # word-piece graphs have none
                g.ndata["root"] = g.ndata["root"].bool()  # stored as uint8
        return graphs

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return (self.graphs[i] if self.graphs is not None else self.build(i)), self.labels[i]


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


def num_classes_of(cfg: Mapping, splits: dict) -> int:
    fixed = dataset_entry(cfg["name"]).num_classes
    if fixed is not None:
        return fixed
    return int(cfg.get("num_classes") or max(max(ds["label"]) for ds in splits.values()) + 1)
