"""One encoder for every model: embed tokens, run L blocks of message passing, read out, classify.

    h⁰_i   = Embed(tok_i) + PE(pos_i)
    ĥ_i    = h_i + Dropout(Aggregate(LN(h))_i)          (aggregate: the only part a model name changes)
    h_i'   = ĥ_i + Dropout(MLP(LN(ĥ_i)))                (update: the position-wise feed-forward)
    logits = Classifier(LN(Readout({h^L_i})))

This is the pre-LayerNorm Transformer block (Xiong et al., 2020); ``norm=post`` gives the
original post-LN block. With ``share_weights`` one block is applied L times: a recurrent GNN,
which can go deep cheaply (a k-layer GNN only sees k hops of a ListOps tree).

``update=gru`` replaces the residual sum of the aggregation step by a gated update (Li et al.,
2016, gated graph networks): ĥ_i = GRU(Dropout(Aggregate(LN(h))_i), h_i), so a node can keep its
state until its children's messages are ready. ``edge_types`` lets every message know whether it
comes from a child, the head, itself, the left or the right (``models/aggregators/edge_types.py``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass

import dgl
import torch
from torch import nn

from data.graphs import EDGE_TYPES, PE_GRAPHS, STRUCTURAL_PE, GraphKind
from models.aggregators import AGGREGATORS
from models.dense import DenseGraph, to_dense
from models.embeddings import EmbeddingOptions, len_of, make_embedding
from models.impl import check_impl, choose_impl
from models.knn import rebuild, rebuild_dense
from models.registry import ModelFamily, build_model, register_family, typed_fields  # noqa: F401  (build_model: re-exported)
from models.torch_mp import EdgeGraph

READOUTS = ("mean", "root", "cls")
POSITIONAL = ("sinusoidal", "none") + STRUCTURAL_PE
NORMS = ("pre", "post")
UPDATES = ("residual", "gru")


def sinusoidal_encoding(pos: torch.Tensor, dim: int) -> torch.Tensor:
    """PE(p, 2k) = sin(p / 10000^(2k/d)), PE(p, 2k+1) = cos(...) (Vaswani et al., 2017); zero where p < 0."""
    freqs = torch.exp(torch.arange(0, dim, 2, device=pos.device).float() * (-math.log(10000.0) / dim))  # (d/2,)
    angles = pos.clamp(min=0).float().unsqueeze(-1) * freqs  # (N, d/2)
    pe = torch.zeros(pos.shape[0], dim, device=pos.device)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe * (pos >= 0).unsqueeze(-1)  # the <cls> node (pos -1) has no position


class Block(nn.Module):
    """Residual aggregation, then residual feed-forward; LayerNorm before (pre) or after (post) each."""

    def __init__(
        self,
        aggregator: nn.Module,
        dim: int,
        ffn: bool,
        ffn_mult: int,
        dropout: float,
        norm: str,
        update: str = "residual",
    ):
        super().__init__()
        if update not in UPDATES:
            raise ValueError(f"unknown model.update {update!r}; valid: {', '.join(UPDATES)}")
        self.aggregator, self.norm_type = aggregator, norm
        self.gru = nn.GRUCell(dim, dim) if update == "gru" else None  # gated update of h by the message
        self.norm1, self.dropout = nn.LayerNorm(dim), nn.Dropout(dropout)
        self.ffn = (
            nn.Sequential(nn.Linear(dim, ffn_mult * dim), nn.GELU(), nn.Linear(ffn_mult * dim, dim)) if ffn else None
        )
        self.norm2 = nn.LayerNorm(dim) if ffn else None

    def aggregate(self, g: dgl.DGLGraph | DenseGraph | EdgeGraph, h: torch.Tensor) -> torch.Tensor:
        if isinstance(g, DenseGraph):  # the dense twin: h is (B, n, d)
            return self.aggregator.forward_dense(h, g)
        if isinstance(g, EdgeGraph):  # message passing in stock torch (models/torch_mp.py): h is (N, d)
            if not hasattr(self.aggregator, "forward_edges"):
                raise ValueError(
                    f"{type(self.aggregator).__name__} has no forward_edges (message passing in stock torch): "
                    "use model.impl=dense, or model.impl=sparse where DGL reaches the model's device"
                )
            return self.aggregator.forward_edges(h, g)
        return self.aggregator(g, h)  # DGL's message passing: h is (N, d)

    def combine(self, h: torch.Tensor, message: torch.Tensor) -> torch.Tensor:
        """h + message (residual), or GRU(message, h) (gated), for (N, d) or (B, n, d) tensors."""
        if self.gru is None:
            return h + message
        return self.gru(message.reshape(-1, h.shape[-1]), h.reshape(-1, h.shape[-1])).view_as(h)

    def forward(self, g: dgl.DGLGraph | DenseGraph | EdgeGraph, h: torch.Tensor) -> torch.Tensor:
        if self.norm_type == "pre":
            h = self.combine(h, self.dropout(self.aggregate(g, self.norm1(h))))  # (N, d) or (B, n, d)
            if self.ffn is not None:
                h = h + self.dropout(self.ffn(self.norm2(h)))
            return h
        h = self.norm1(self.combine(h, self.dropout(self.aggregate(g, h))))
        if self.ffn is not None:
            h = self.norm2(h + self.dropout(self.ffn(h)))
        return h


class GraphEncoder(nn.Module):
    """Token graph -> class logits.

    ``construction`` is the one the batches were built with (``data.graphs.GraphConstruction``);
    the encoder needs it only for a dynamic construction (kNN), whose edges it rebuilds from each layer's
    features, and to know a complete graph when it sees one. ``impl`` picks how aggregation runs:
    ``sparse`` (DGL message passing; in stock torch where DGL cannot follow the model to its device),
    ``torch_sparse`` (message passing in stock torch, ``models/torch_mp.py``, anywhere), ``dense`` (padded
    batch + adjacency mask, ``models/dense.py``) or ``auto``: ``models.impl.choose_impl`` decides (on the CPU, dense
    when edges / (B * n_max^2), the share of the padded batch's n x n pairs that are edges, is at least
    ``dense_min_density``; on a GPU, dense up to ``GPU_DENSE_MAX_NODES`` nodes per graph; dense whenever DGL
    cannot follow the model to its device). All impls share every parameter.
    """

    impl: str  # sparse | dense | auto | torch_sparse (models.registry.Model: evaluate.py's impl= sets it)

    def __init__(
        self,
        config: EncoderConfig,
        vocab_size: int,
        num_classes: int,
        construction=None,
        embed: nn.Module | None = None,
    ):
        """Every knob comes from ``config`` (checked when it was made: conf/ is the only source of its values;
        ``models.registry.yaml_config(name, **overrides)`` makes one outside train.py). ``embed``: a given
        embedding table (models/embeddings.py: GloVe), else a learned one."""
        super().__init__()
        hidden_dim, num_heads, aggregator = config.hidden_dim, config.num_heads, config.name
        self.hidden_dim, self.num_layers = hidden_dim, config.num_layers
        self.positional, self.readout = config.positional, config.readout
        self.construction, self.impl, self.dense_min_density = construction, config.impl, config.dense_min_density
        self.edge_types = bool(config.edge_types)
        # a given table (models/embeddings.py: GloVe) maps token ids to hidden_dim as nn.Embedding does
        self.embed = embed if embed is not None else nn.Embedding(vocab_size, hidden_dim)
        self.embed_dropout = nn.Dropout(config.dropout)
        # lap_pe / random_walk_pe arrive as ndata['pe'] (N, pe_dim), built with the graphs; a linear map to d
        self.pe_proj = nn.Linear(config.pe_dim, hidden_dim) if config.positional in STRUCTURAL_PE else None
        takes_scaled = "scaled" in inspect.signature(AGGREGATORS[aggregator]).parameters  # dot-product attention
        extra = {"scaled": config.scaled} if takes_scaled else {}
        if config.edge_types:
            extra["edge_types"] = len(EDGE_TYPES)

        def make_block():
            agg = AGGREGATORS[aggregator](hidden_dim, num_heads=num_heads, attn_dropout=config.attn_dropout, **extra)
            return Block(agg, hidden_dim, config.ffn, config.ffn_mult, config.dropout, config.norm, config.update)

        self.blocks = nn.ModuleList([make_block() for _ in range(1 if config.share_weights else config.num_layers)])
        self.final_norm = nn.LayerNorm(hidden_dim) if config.norm == "pre" else nn.Identity()
        self.classifier = nn.Linear(hidden_dim, num_classes)

    def layers(self):
        """The block used at each of the L layers (the same one L times when weights are shared)."""
        return [self.blocks[i % len(self.blocks)] for i in range(self.num_layers)]

    @property
    def device(self) -> torch.device:
        """Where the model's parameters are."""
        return next(self.parameters()).device

    @property
    def dynamic(self) -> bool:
        return self.construction is not None and self.construction.dynamic

    def choose_impl(self, g: dgl.DGLGraph) -> str:
        """sparse, dense or torch_sparse for this batch: ``models.impl.choose_impl`` decides (see the class
        docstring)."""

        def n_max() -> int:  # nodes of the largest graph (asked on a GPU only)
            return int(g.batch_num_nodes().max())

        def density() -> float:  # edges / (B * n_max^2): the share of the padded pairs that are edges
            sizes = g.batch_num_nodes().double()
            edges = sum(self.construction.edge_count(int(n)) for n in sizes) if self.dynamic else g.num_edges()
            return edges / (len(sizes) * sizes.max() ** 2)

        return choose_impl(self.impl, self.device, g.device, n_max, density, self.dense_min_density, stock_torch=True)

    def embed_nodes(self, g: dgl.DGLGraph) -> torch.Tensor:
        """h⁰ = Embed(tok) + PE(pos), (N, d), on the model's device."""
        device = self.device
        h = self.embed(g.ndata["tok"].to(device))  # (N, d)
        if self.positional == "sinusoidal":
            h = h + sinusoidal_encoding(g.ndata["pos"].to(device), self.hidden_dim)
        elif self.pe_proj is not None:
            h = h + self.pe_proj(self.structural_pe(g).to(device))
        return self.embed_dropout(h)

    def structural_pe(self, g: dgl.DGLGraph) -> torch.Tensor:
        """``ndata['pe']`` (N, pe_dim); for lap_pe, while training, each eigenvector of each graph gets a
        random sign (an eigenvector's sign is arbitrary: the model must not rely on it)."""
        if "pe" not in g.ndata:
            raise ValueError(
                f"model.positional={self.positional} needs graphs built with it (ndata['pe']): "
                "build them with data.graphs.make_construction(graph_cfg, vocab, model_cfg)"
            )
        pe = g.ndata["pe"]
        if self.positional == "lap_pe" and self.training:
            sizes = g.batch_num_nodes().to(pe.device)
            signs = torch.randint(0, 2, (len(sizes), pe.shape[1]), device=pe.device) * 2.0 - 1.0  # (B, k)
            pe = pe * signs.repeat_interleave(sizes, dim=0)
        return pe

    def node_states(self, g: dgl.DGLGraph, stock_torch: bool = False) -> torch.Tensor:
        """Final node features (N, d), by message passing on ``g``: DGL's, or with ``stock_torch`` the
        aggregators' ``forward_edges`` on ``g``'s edges moved to the model's device (``g`` may stay on the CPU)."""
        h = self.embed_nodes(g)
        layer_graph = EdgeGraph.of(g, h.device) if stock_torch and not self.dynamic else g
        for block in self.layers():
            if self.dynamic and stock_torch:  # kNN's edges (from detached features) are built where g lives
                layer_graph = EdgeGraph.of(rebuild(self.construction, g, h.detach().to(g.device)), h.device)
            elif self.dynamic:
                layer_graph = rebuild(self.construction, g, h)
            h = block(layer_graph, h)
        return self.final_norm(h)

    def dense_graph(self, g: dgl.DGLGraph) -> tuple[DenseGraph, torch.Tensor]:
        """The padded twin of ``g`` on the model's device, and its (B, n) mask of token nodes."""
        device = self.device
        complete = self.construction is not None and self.construction.dense_complete
        dg = to_dense(g, device, complete=complete, edge_types=self.edge_types)
        return dg, dg.valid & (dg.pad(g.ndata["pos"].to(device)) >= 0)  # pos is -1 at <cls>

    def dense_states(self, g: dgl.DGLGraph) -> tuple[torch.Tensor, DenseGraph, torch.Tensor]:
        """Final node features (B, n, d) of the padded batch, its DenseGraph and token mask."""
        dg, tokens = self.dense_graph(g)
        x = dg.pad(self.embed_nodes(g))  # (B, n, d)
        for block in self.layers():
            x = block(rebuild_dense(self.construction, dg, x, tokens, self.edge_types) if self.dynamic else dg, x)
        return self.final_norm(x), dg, tokens

    def forward(self, g: dgl.DGLGraph, nodes: bool = False):
        """Class logits (B, C); with ``nodes``, also every node's logits (N, C) from the same classifier
        (the phrase-level loss of ``trainer.phrase_loss``)."""
        impl = self.choose_impl(g)
        if impl != "dense":
            # DGL's kernels take one dtype: message passing runs in float32 under trainer.precision=bf16 (and in
            # stock torch too, to compute the same function)
            with torch.autocast(self.device.type, enabled=False):
                return self.sparse_forward(g, nodes, stock_torch=impl == "torch_sparse")
        x, dg, tokens = self.dense_states(g)  # (B, n, d)
        if self.readout == "mean":
            weight = tokens.unsqueeze(-1).float()  # (B, n, 1)
            hg = (x * weight).sum(1) / weight.sum(1).clamp(min=1)  # (B, d)
        elif self.readout == "root":
            hg = x[dg.pad(g.ndata["root"].to(x.device))]  # (B, d)
        else:  # cls: each graph's last node
            hg = x[torch.arange(x.shape[0], device=x.device), dg.valid.sum(1) - 1]  # (B, d)
        return (self.classifier(hg), self.classifier(dg.unpad(x))) if nodes else self.classifier(hg)  # (B, C)

    def sparse_forward(self, g: dgl.DGLGraph, nodes: bool = False, stock_torch: bool = False):
        """:meth:`forward` by message passing on ``g``: DGL's, or with ``stock_torch`` stock torch's on the model's
        device (``g`` may stay on the CPU: only its index tensors travel)."""
        h = self.node_states(g, stock_torch)  # (N, d)
        if self.readout == "mean":
            hg = self._mean_tokens_torch(g, h) if stock_torch else self._mean_tokens(g, h)  # (B, d)
        elif self.readout == "root":
            hg = h[g.ndata["root"].to(h.device)]  # (B, d): one root per graph
        else:  # cls: the <cls> node is each graph's last (phrase nodes have pos -1 too)
            hg = h[(g.batch_num_nodes().cumsum(0) - 1).to(h.device)]  # (B, d)
        return (self.classifier(hg), self.classifier(h)) if nodes else self.classifier(hg)  # (B, C)

    @staticmethod
    def _mean_tokens(g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """Mean over the token nodes of each graph (a <cls> node, if present, is left out)."""
        is_token = (g.ndata["pos"] >= 0).float().unsqueeze(-1)  # (N, 1)
        with g.local_scope():
            g.ndata["h"], g.ndata["w"] = h * is_token, is_token
            return dgl.sum_nodes(g, "h") / dgl.sum_nodes(g, "w").clamp(min=1)  # (B, d)

    @staticmethod
    def _mean_tokens_torch(g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """:meth:`_mean_tokens` in stock torch, on ``h``'s device."""
        sizes = g.batch_num_nodes().to(h.device)
        graph_id = torch.repeat_interleave(torch.arange(len(sizes), device=h.device), sizes)  # (N,)
        is_token = (g.ndata["pos"].to(h.device) >= 0).to(h.dtype).unsqueeze(-1)  # (N, 1)
        total = h.new_zeros(len(sizes), h.shape[1]).index_add_(0, graph_id, h * is_token)  # (B, d)
        count = h.new_zeros(len(sizes), 1).index_add_(0, graph_id, is_token)  # (B, 1)
        return total / count.clamp(min=1)


@dataclass(frozen=True)
class EncoderConfig(EmbeddingOptions):
    """Every knob of :class:`GraphEncoder`, as conf/encoder/default.yaml (the single source of their defaults)
    and conf/model/<aggregator>.yaml set them. Checked once, when made."""

    name: str  # the aggregator: a key of models.aggregators.AGGREGATORS
    hidden_dim: int
    num_layers: int
    num_heads: int
    ffn: bool
    ffn_mult: int
    dropout: float
    attn_dropout: float
    scaled: bool
    positional: str
    pe_dim: int
    pe_graph: str
    readout: str
    norm: str
    share_weights: bool
    edge_types: bool
    update: str
    impl: str
    dense_min_density: float

    family = "encoder"

    @classmethod
    def from_mapping(cls, cfg: Mapping) -> EncoderConfig:
        return cls(**typed_fields(cls, cfg))

    def __post_init__(self):
        self.check_embeddings()
        for key, valid in (
            ("name", tuple(AGGREGATORS)),
            ("readout", READOUTS),
            ("positional", POSITIONAL),
            ("pe_graph", PE_GRAPHS),
            ("norm", NORMS),
            ("update", UPDATES),
        ):
            if getattr(self, key) not in valid:
                raise ValueError(f"unknown model.{key} {getattr(self, key)!r}; valid: {', '.join(valid)}")
        check_impl(self.impl)
        for key in ("hidden_dim", "num_layers", "num_heads"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"model.{key} must be an integer >= 1, got {value!r}")
        if getattr(AGGREGATORS[self.name], "splits_heads", False) and self.hidden_dim % self.num_heads:
            raise ValueError(
                f"model.hidden_dim={self.hidden_dim} must be divisible by model.num_heads={self.num_heads}"
            )

    def check(self, graph: GraphKind) -> None:
        """Rules between this config and the graph construction (the construction checks the rest)."""


def build_encoder(config: EncoderConfig, vocab_size, num_classes: int, construction=None) -> GraphEncoder:
    """A synchronous encoder with the config's aggregator and sizes."""
    embed = make_embedding(config, vocab_size, config.hidden_dim)
    return GraphEncoder(config, len_of(vocab_size), num_classes, construction, embed)


register_family(
    ModelFamily(
        "encoder",
        models=tuple(AGGREGATORS),
        config=EncoderConfig,
        build=build_encoder,
        description="L blocks of synchronous message passing with one aggregator (gcn, gat, transformer, ...)",
        memory="layers",
        takes_vocab=True,
    )
)
