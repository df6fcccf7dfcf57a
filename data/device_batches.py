"""Dense batches made on the device (issue 48, item 1): a split kept once on the model's device as flat tensors
(token ids, positions, roots, labels, sizes and, for graphs other than the complete graph, every graph's edges
back to back with offsets), so that making a padded batch is indexing there: no DGLGraph, no Python loop over
the examples, no read of the device (the padded length and the batch's edge count come from host copies of
the sizes).

:meth:`DeviceSplit.batch` returns what ``engine.compiled.dense_logits`` takes, equal to
``engine.compiled.padded_inputs`` of the DGL batch of the same examples (tests/data/test_device_batches.py).
Not yet wired into train.py: the trainer switch waits for it (the loop serves DGL batches).
"""

from __future__ import annotations

import torch

from data.graphs.edges import positional_edge_types


def _starts(counts: torch.Tensor) -> torch.Tensor:
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)[:-1]])


class DeviceSplit:
    """One split's graphs as flat tensors on ``device``, from :func:`data.pipeline.pack_graphs`' dict and the
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
        host = torch.as_tensor(indices, dtype=torch.long).cpu()
        n = int(self.sizes_host[host].max()) if pad_to is None else pad_to  # host tensors only
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
        return (tok, pos, valid, adj, etype, root), self.labels[idx]
