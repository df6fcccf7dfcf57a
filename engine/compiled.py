"""``trainer.compile``: the encoder's dense forward on static shapes, compiled with ``torch.compile``.

A dense batch is padded up to a bucket (``models.dense.bucket_length``: multiples of 16 up to 256 nodes, then
8 sizes per octave), so its shapes repeat and the compiled code is re-made at most once per (batch size,
bucket); the last, short batch of an epoch is one more batch size. Inside the compiled function is nothing
but tensors: the padded token ids and positions, the validity mask, the adjacency (None on the complete
graph) and the edge types; no DGL, no read of the device (``DenseGraph.full`` is False: masks always on).

What cannot be compiled runs eagerly, said once in the log: a batch ``impl=auto`` sends to message passing
(DGL's graphs), the node logits of ``trainer.phrase_loss``, a dynamic construction (kNN: edges from each
layer's features) and structural positions (lap_pe: a random sign per graph). Evaluation stays eager.

On a GPU the mode is ``reduce-overhead`` (CUDA graphs: one launch replays the whole forward); on the CPU
the default mode (issue 48). What compiling gains on the CPU is not measured here: the committed CPU bench
(``bench/results/cpu-2core/anchor.md``) times eager loops only.

``trainer.device_batches``: the batches are made on the model's device (``data.device_batches``), not by DGL
(validation and test too: ``engine.evaluation.predict`` runs :func:`device_logits` on them); :func:`check_device_batches` says where that cannot apply. Eagerly, :class:`DeviceDense` runs
:func:`device_logits`, the dense forward of ``GraphEncoder`` step for step (the same random draws: the same loss
as the DGL batch); with ``trainer.compile``, :class:`CompiledDense` takes the bucketed batch as it is.
"""

from __future__ import annotations

import logging

import dgl
import torch
from torch import nn

from data.device_batches import DenseBatch
from data.graphs import STRUCTURAL_PE
from models.dense import DenseGraph, bucket_length, to_dense
from models.encoder import GraphEncoder, sinusoidal_encoding

log = logging.getLogger("train")
BACKEND = "inductor"  # torch.compile's backend (tests trace with a cheaper one: "aot_eager" generates no code)


def compile_mode(device: torch.device) -> str:
    """``reduce-overhead`` (CUDA graphs) on a GPU, ``default`` elsewhere."""
    return "reduce-overhead" if device.type == "cuda" else "default"


def dense_logits(
    model: GraphEncoder,
    tok: torch.Tensor,
    pos: torch.Tensor,
    valid: torch.Tensor,
    adj: torch.Tensor | None,
    etype: torch.Tensor | None,
    root: torch.Tensor | None,
) -> torch.Tensor:
    """Class logits (B, C) of a padded batch, as ``GraphEncoder.forward``'s dense path computes them from a
    DGL batch: ``tok``, ``pos`` (B, n) long (anything at padding), ``valid`` (B, n) bool, ``adj`` (B, n, n) bool
    or None (complete graph), ``etype`` (B, n, n) long or None, ``root`` (B, n) bool (readout root) or None.
    Tensors only, fixed shapes: what ``torch.compile(fullgraph=True)`` takes."""
    b, n = valid.shape
    dg = DenseGraph(valid, None, adj, etype, full=False)  # index: unused here (nothing is unpadded)
    x = model.embed(tok)  # (B, n, d)
    if model.positional == "sinusoidal":
        x = x + sinusoidal_encoding(pos.reshape(-1), model.hidden_dim).view(b, n, -1)
    x = model.embed_dropout(x) * valid.unsqueeze(-1).to(x.dtype)  # zeros at padding, as DenseGraph.pad
    for block in model.layers():
        x = block(dg, x)
    x = model.final_norm(x)
    tokens = valid & (pos >= 0)  # pos is -1 at <cls>
    if model.readout == "mean":
        weight = tokens.unsqueeze(-1).to(x.dtype)  # (B, n, 1)
        hg = (x * weight).sum(1) / weight.sum(1).clamp(min=1)  # (B, d)
    elif model.readout == "root":  # one root per graph: its position, without a data-dependent shape
        hg = x[torch.arange(b, device=x.device), root.to(torch.int64).argmax(1)]  # (B, d)
    else:  # cls: each graph's last node
        hg = x[torch.arange(b, device=x.device), valid.sum(1) - 1]  # (B, d)
    return model.classifier(hg)


def device_logits(model: GraphEncoder, batch: DenseBatch) -> torch.Tensor:
    """Class logits (B, C) of a batch made on the device (``DeviceSplit.dense(..., flat=True)``), computed as
    ``GraphEncoder.forward``'s dense path computes them from the DGL batch of the same examples: the embedding
    and its dropout on the flat nodes, then padded (so dropout draws the same numbers); no read of the device
    (``batch.full``: from the host's sizes)."""
    h = model.embed(batch.flat_tok)  # (N, d)
    if model.positional == "sinusoidal":
        h = h + sinusoidal_encoding(batch.flat_pos, model.hidden_dim)
    dg = DenseGraph(batch.valid, batch.index, batch.adj, batch.etype, full=batch.full)
    x = dg.pad(model.embed_dropout(h))  # (B, n, d)
    for block in model.layers():
        x = block(dg, x)
    x = model.final_norm(x)
    b = x.shape[0]
    if model.readout == "mean":
        weight = (batch.valid & (batch.pos >= 0)).unsqueeze(-1).float()  # (B, n, 1): tokens (pos is -1 at <cls>)
        hg = (x * weight).sum(1) / weight.sum(1).clamp(min=1)  # (B, d)
    elif model.readout == "root":
        hg = x[torch.arange(b, device=x.device), batch.root.to(torch.int64).argmax(1)]  # (B, d)
    else:  # cls: each graph's last node
        hg = x[torch.arange(b, device=x.device), batch.valid.sum(1) - 1]  # (B, d)
    return model.classifier(hg)


def check_device_batches(impl: str, device: torch.device, construction, run, world_size: int, lazy: bool) -> None:
    """Raise (one line, naming the fix) where ``trainer.device_batches=true`` cannot apply: it makes dense batches,
    so the run's batches must all go to the dense path (``model.impl=dense``, or ``auto`` on a GPU, where the
    encoder trains dense batches), with nothing the dense forward on tensors lacks."""
    off = "or set trainer.device_batches=false"
    if impl != "dense" and not (impl == "auto" and device.type == "cuda"):
        raise ValueError(
            f"trainer.device_batches=true makes dense batches, and model.impl={impl} on {device.type} may send "
            f"batches to message passing: set model.impl=dense, {off}"
        )
    why = None
    if world_size > 1:
        why = "trains in one process: drop torchrun"
    elif run.trainer.phrase_loss:
        why = "has no node labels: set trainer.phrase_loss=false"
    elif construction.dynamic:
        why = f"cannot build graph={construction.name}'s edges from features: use another graph"
    elif getattr(run.model, "positional", None) in STRUCTURAL_PE:
        why = f"has no model.positional={run.model.positional}: use model.positional=sinusoidal"
    elif lazy:
        why = "keeps a split whole on the device, and the memory plan builds this one per batch"
    if why:
        raise ValueError(f"trainer.device_batches=true {why}, {off}")


def encoder_only(model, switch: str, what: str) -> GraphEncoder:
    """``model`` when it is a GraphEncoder, else the one-line error that names ``switch``'s fix."""
    if not isinstance(model, GraphEncoder):
        raise ValueError(
            f"{switch}=true {what} (gcn, gat, transformer, ...), and {type(model).__name__} is not one: "
            f"use {switch}=false"
        )
    return model


class DeviceDense(nn.Module):
    """``model`` (a GraphEncoder) taking the batches made on the device (:func:`device_logits`), eagerly. Holds
    ``model``'s own parameters: the optimiser, checkpoints and evaluation use ``model``."""

    def __init__(self, model: GraphEncoder):
        super().__init__()
        self.model = encoder_only(model, "trainer.device_batches", "makes the encoder family's dense batches")

    def forward(self, batch: DenseBatch) -> torch.Tensor:
        return device_logits(self.model, batch)


def padded_inputs(model: GraphEncoder, g: dgl.DGLGraph, pad_to: int | None = None) -> tuple:
    """:func:`dense_logits`'s arguments for the DGL batch ``g``, on the model's device, padded to ``pad_to``
    (default: the bucket of ``g``'s largest graph)."""
    device = model.device
    if pad_to is None:
        pad_to = bucket_length(int(g.batch_num_nodes().max()))  # g's sizes: on the host
    complete = model.construction is not None and model.construction.dense_complete
    dg = to_dense(g, device, complete=complete, edge_types=model.edge_types, pad_to=pad_to)
    tok, pos = dg.pad(g.ndata["tok"].to(device)), dg.pad(g.ndata["pos"].to(device))
    root = dg.pad(g.ndata["root"].to(device)).bool() if model.readout == "root" else None
    return tok, pos, dg.valid, dg.adj, dg.etype, root


def eager_reason(model: GraphEncoder, g: dgl.DGLGraph, nodes: bool) -> str | None:
    """Why this batch runs eagerly (a line for the log), or None: it compiles."""
    if nodes:
        return "trainer.phrase_loss's node logits"
    if model.dynamic:
        return f"graph={model.construction.name} builds its edges from each layer's features"
    if model.pe_proj is not None:
        return f"model.positional={model.positional}"
    impl = model.choose_impl(g)
    if impl != "dense":
        return f"impl={model.impl} sends this batch to message passing ({impl})"
    return None


class CompiledDense(nn.Module):
    """``model`` (a GraphEncoder) whose dense batches run :func:`dense_logits`, compiled, on padded shapes; the
    rest eagerly (:func:`eager_reason`, logged once each). Holds ``model``'s own parameters (no copy): the
    optimiser, checkpoints and evaluation use ``model``."""

    def __init__(self, model: GraphEncoder, mode: str | None = None, backend=None, fullgraph: bool = True):
        super().__init__()
        self.model = encoder_only(model, "trainer.compile", "compiles the encoder family's dense forward")
        mode, backend = mode or compile_mode(model.device), backend or BACKEND
        options = {"mode": mode} if backend == "inductor" else {}
        # the shapes repeat by construction: static shapes, never dynamic ones (a CUDA graph needs them fixed);
        # one compiled graph per (batch size, bucket), so the cache must hold them all
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        self.compiled = torch.compile(dense_logits, backend=backend, fullgraph=fullgraph, dynamic=False, **options)
        self.said: set[str] = set()

    def forward(self, g: dgl.DGLGraph | DenseBatch, nodes: bool = False):
        if isinstance(g, DenseBatch):  # trainer.device_batches: made on the device, padded to its bucket
            return self.compiled(self.model, *g.inputs())
        reason = eager_reason(self.model, g, nodes)
        if reason is not None:
            if reason not in self.said:
                self.said.add(reason)
                log.info("trainer.compile: %s: runs eagerly, not compiled (said once)", reason)
            return self.model(g, nodes=nodes)
        return self.compiled(self.model, *padded_inputs(self.model, g))
