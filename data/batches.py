"""Batches of graphs for a loop: a split's graphs as flat arrays (:func:`pack_graphs`, :class:`PackedGraphs`,
what the graph cache stores and ``data/device_batches.py`` reads), :func:`collate`, the training order
(:class:`TrainBatches`) and the batches themselves (:class:`Batches`, :func:`make_loader`)."""

from __future__ import annotations

import dgl
import torch


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
    ds,
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
    """Batches of graphs (:class:`Batches`) of ``ds`` (a ``data.graph_dataset.GraphDataset``). Training (``shuffle``) uses :class:`TrainBatches`; evaluation keeps
    dataset order (``keep``: collated once, served every epoch). ``loader.rng`` is the generator that orders
    the training batches (saved for resume). ``prefetch``/``pin``: collate ahead in a thread, into pinned memory."""
    if shuffle:
        sampler = TrainBatches(ds.sizes, batch_size, seed, bucket, rank=rank, world=world)
        loader = Batches(ds, sampler, prefetch=prefetch, pin=pin)
        loader.rng = sampler.generator
        return loader
    order = [list(range(i, min(i + batch_size, len(ds)))) for i in range(0, len(ds), batch_size)]
    return Batches(ds, order, keep=keep, prefetch=prefetch, pin=pin)
