"""Dense batches made on the device (issue 48, item 1): a split kept once on the model's device as flat tensors
(token ids, positions, roots, labels, sizes and, for graphs other than the complete graph, every graph's edges
back to back with offsets), so that making a padded batch is indexing there: no DGLGraph, no Python loop over
the examples, no read of the device (the padded length and the batch's edge count come from host copies of
the sizes).

:meth:`DeviceSplit.batch` returns what ``engine.compiled.dense_logits`` takes, equal to
``engine.compiled.padded_inputs`` of the DGL batch of the same examples (tests/data/test_device_batches.py).
:meth:`DeviceSplit.dense` adds what the eager forward needs to draw the same random numbers as the DGL path (each
node's flat row and its place in the padded batch); :class:`DeviceBatches` serves a training split's batches
in a :class:`data.batches.TrainBatches` order, and the validation and test splits' in dataset order
(``trainer.device_batches``: train.py, engine/compiled.py, engine/evaluation.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from data.graphs.edges import positional_edge_types


def _starts(counts: torch.Tensor) -> torch.Tensor:
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)[:-1]])


@dataclass
class DenseBatch:
    """A padded batch made on the device: ``tok``, ``pos`` (B, n) long (0 at padding), ``valid`` (B, n) bool, ``adj``
    (B, n, n) bool or None (complete graph), ``etype`` (B, n, n) long or None, ``root`` (B, n) bool or None; with
    ``flat``: ``index`` (N,) each real node's place in the flattened (B * n), ``flat_tok``/``flat_pos`` (N,) its
    token and position (in the order of a DGL batch's nodes); ``full``: no node is padding (known on the host)."""

    tok: torch.Tensor
    pos: torch.Tensor
    valid: torch.Tensor
    adj: torch.Tensor | None
    etype: torch.Tensor | None
    root: torch.Tensor | None
    full: bool
    index: torch.Tensor | None = None
    flat_tok: torch.Tensor | None = None
    flat_pos: torch.Tensor | None = None

    def inputs(self) -> tuple:
        """``engine.compiled.dense_logits``' tensors."""
        return self.tok, self.pos, self.valid, self.adj, self.etype, self.root


class DeviceSplit:
    """One split's graphs as flat tensors on ``device``, from :func:`data.batches.pack_graphs`' dict and the
    labels. ``complete``: the complete graph with self loops (no edges kept: implied by the sizes); ``edge_types``:
    the (B, n, n) types too; ``root``: each graph's root (``model.readout=root``)."""

    def __init__(
        self, packed: dict, labels: torch.Tensor, device, complete: bool, edge_types: bool = False, root: bool = False
    ):
        self.device, self.complete, self.edge_types = torch.device(device), complete, edge_types
        self.sizes_host = packed["nodes"].long()  # the host's copies: a batch's n and edge count, with no device read
        self.edges_host = packed["edges"].long()
        on = self.device
        self.sizes = self.sizes_host.to(on)
        self.node_start = _starts(self.sizes)
        nd = packed["ndata"]
        self.tok, self.pos = nd["tok"].long().to(on), nd["pos"].long().to(on)
        self.root = nd["root"].bool().to(on) if root else None
        self.labels = labels.to(on)
        if not complete:
            self.num_edges, self.edge_start = self.edges_host.to(on), _starts(self.edges_host).to(on)
            self.src, self.dst = packed["src"].long().to(on), packed["dst"].long().to(on)
            self.etype = packed["edata"]["etype"].long().to(on) if edge_types else None

    def __len__(self) -> int:
        return len(self.sizes_host)

    def batch(self, indices: torch.Tensor, pad_to: int | None = None) -> tuple[tuple, torch.Tensor]:
        """``((tok, pos, valid, adj, etype, root), labels)`` of the examples ``indices`` (host or device, long),
        padded to ``pad_to`` nodes (default: the largest of them, from the host's sizes)."""
        made, labels = self.dense(indices, pad_to)
        return made.inputs(), labels

    def dense(self, indices, pad_to: int | None = None, flat: bool = False) -> tuple[DenseBatch, torch.Tensor]:
        """:meth:`batch` as a :class:`DenseBatch`; ``flat``: with each real node's flat row and padded place."""
        host = torch.as_tensor(indices, dtype=torch.long).cpu()
        host_sizes = self.sizes_host[host]
        n = int(host_sizes.max()) if pad_to is None else pad_to  # host tensors only
        full = bool(host_sizes.min() == n)
        idx = host.to(self.device, non_blocking=True)
        b, on = len(host), self.device
        sizes = self.sizes[idx]  # (B,)
        col = torch.arange(n, device=on)
        valid = col[None, :] < sizes[:, None]  # (B, n)
        rows = (self.node_start[idx][:, None] + col[None, :]).clamp(max=len(self.tok) - 1)  # (B, n) flat node ids
        tok = torch.where(valid, self.tok[rows], 0)
        pos = torch.where(valid, self.pos[rows], 0)
        root = torch.where(valid, self.root[rows], False) if self.root is not None else None
        adj = etype = None
        if self.complete:
            if self.edge_types:
                etype = positional_edge_types(torch.where(valid, self.pos[rows], -1))
        else:
            total = int(self.edges_host[host].sum())  # host
            counts = self.num_edges[idx]
            graph = torch.repeat_interleave(torch.arange(b, device=on), counts, output_size=total)  # (E,)
            local = torch.arange(total, device=on) - _starts(counts)[graph]
            rows_e = self.edge_start[idx][graph] + local  # (E,) flat edge ids
            dst, src = self.dst[rows_e], self.src[rows_e]
            adj = torch.zeros(b, n, n, dtype=torch.bool, device=on)
            adj[graph, dst, src] = True
            if self.edge_types:
                etype = torch.zeros(b, n, n, dtype=torch.long, device=on)
                etype[graph, dst, src] = self.etype[rows_e]
        made = DenseBatch(tok, pos, valid, adj, etype, root, full)
        if flat:  # as the DGL batch numbers its nodes: graph by graph
            total = int(host_sizes.sum())  # host
            graph = torch.repeat_interleave(torch.arange(b, device=on), sizes, output_size=total)  # (N,)
            local = torch.arange(total, device=on) - _starts(sizes)[graph]
            node_rows = self.node_start[idx][graph] + local
            made.index, made.flat_tok, made.flat_pos = graph * n + local, self.tok[node_rows], self.pos[node_rows]
        return made, self.labels[idx]


class DeviceBatches:
    """A split's batches made on the device (:meth:`DeviceSplit.dense`), in the order ``batch_sampler`` gives
    (train.py: the :class:`data.batches.TrainBatches` the DGL loader would use, so both make the same batches;
    for validation and test, the DGL loader's dataset-order chunks); ``pad``: a batch's padded length from its largest graph's (``trainer.compile``: the bucket), or
    None (the largest). Each pass draws one number from torch's global generator, as ``data.batches.Batches``
    does, so dropout draws what it draws with DGL batches. ``rng``: the sampler's generator (saved for resume)."""

    def __init__(self, split: DeviceSplit, batch_sampler, pad=None):
        self.split, self.batch_sampler, self.pad = split, batch_sampler, pad
        self.flat = pad is None  # the eager forward embeds the flat nodes, as the DGL path does
        self.rng = getattr(batch_sampler, "generator", None)

    def __len__(self) -> int:
        return len(self.batch_sampler)

    def __iter__(self):
        # what DataLoader.__iter__ draws, at the call (as Batches: not at the first batch): the RNG stream stays put
        torch.empty((), dtype=torch.int64).random_()
        return self._made()

    def _made(self):
        sizes = self.split.sizes_host
        for indices in self.batch_sampler:
            host = torch.as_tensor(indices, dtype=torch.long)
            pad_to = None if self.pad is None else self.pad(int(sizes[host].max()))
            yield self.split.dense(host, pad_to, flat=self.flat)
