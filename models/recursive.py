"""Scheduled message passing: every node updates once, after all its children.

The synchronous models (``models/encoder.py``) update every node at every layer, so L layers see
L hops. A *recursive* model walks the tree instead, leaves first: a node's state is a function of
its own token and its children's finished states,

    h_i = Cell(x_i, {h_c : c a child of i})                       (children before heads)

so one pass reaches the root however deep the tree is. This is how syntax trees first entered
neural NLP (recursive networks, Tree-LSTMs), the essay's "earlier way": here they are the anchor
the message-passing models are held to. Three cells:

  childsum   Child-Sum Tree-LSTM (Tai et al., 2015): gates from the *sum* of the children's h,
             one forget gate per child. Any number of children, in any order.
  binary     N-ary Tree-LSTM with N = 2 (Tai et al., 2015): separate weights for the left and the
             right child. Reads graph=binary_tree (the published ListOps parentheses).
  deepsets   h_i = MLP([x_i ; Σ_c φ(h_c)]): a Deep Sets / GIN update (Zaheer et al., 2017; Xu et
             al., 2019). Its children's sum can count, which sum-mod-10 needs.

Two ways to run the schedule, tested equal (tests/models/test_recursive.py):

* ``forward_reference``: DGL's own idiom, ``dgl.prop_nodes_topo`` over the child -> head graph
  with a message / reduce / apply function per cell: readable, but one Python-level pull per
  frontier, with DGL's degree bucketing inside each.
* ``forward`` (the one that trains): the same levels precomputed once per batch (a node's
  *height* is 0 at a leaf, 1 + its tallest child's otherwise; all nodes of one height can be
  computed together), then per level one gather of the children's states, one ``index_add``
  and one cell call for the whole batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import dgl
import torch
from torch import nn

from data.graphs import FROM_CHILD, GRAPH_KINDS, GraphKind, tree_graphs
from models.embeddings import EmbeddingOptions, len_of, make_embedding
from models.registry import ModelFamily, register_family, typed_fields

CELLS = ("childsum", "binary", "deepsets")


# --------------------------------------------------------------------------------------------
# The schedule of a batch: levels of nodes, and the child -> head edges into each level
# --------------------------------------------------------------------------------------------
@dataclass
class Level:
    nodes: torch.Tensor  # (P,) the nodes computed at this level
    child: torch.Tensor  # (E,) each child -> head edge into them, sorted by (head, slot): the child
    parent: torch.Tensor  # (E,) ... and the head's index in ``nodes`` (0..P-1)
    slot: torch.Tensor  # (E,) ... and the child's place among its siblings (0 = leftmost)
    # Routing, so that no step touches a tensor of all N nodes (whose gradient would be a zero-filled
    # (N, d) tensor per level, O(N x levels) in all): every node is some head's child exactly once.
    inbox: torch.Tensor | None = None  # (E,) the received child states (concatenated in producer order) -> edge order
    outbox: torch.Tensor | None = None  # (P,) this level's new states -> grouped by the level that reads them
    sends: list[int] | None = None  # how many go to each later level, then how many are roots (read by no one)


def child_edges(g: dgl.DGLGraph) -> tuple[torch.Tensor, torch.Tensor]:
    """``(child, head)`` of every tree edge, read from the edge types the constructions store."""
    if "height" not in g.ndata or "etype" not in g.edata:
        raise ValueError(
            "recursive models (model=treelstm, model=recursive) need a tree to walk: "
            f"use graph={' or graph='.join(tree_graphs())}"
        )
    src, dst = g.edges()
    up = g.edata["etype"] == FROM_CHILD
    return src[up], dst[up]


def schedule(g: dgl.DGLGraph) -> list[Level]:
    """The levels of a batch of trees, leaves first (``ndata['height']`` was stored by the construction)."""
    child, head = (t.cpu() for t in child_edges(g))  # checks first that the graphs carry a tree
    height = g.ndata["height"].cpu()  # (N,) the schedule is built on the CPU; the model moves each level
    order = torch.argsort(height, stable=True)  # nodes level by level
    counts = torch.bincount(height).tolist()  # nodes per level
    rank = torch.empty_like(order)  # a node's index within its level
    starts = torch.cumsum(torch.tensor([0] + counts[:-1]), 0)
    rank[order] = torch.arange(len(order)) - starts.repeat_interleave(torch.tensor(counts))
    slot = g.ndata["slot"].cpu()[child]
    # edges level by level, and within a level by head and slot: a level whose heads all have N
    # children then holds their states in (P, N) order already (the binary cell's fast case)
    key = (height[head] * len(order) + rank[head]) * (int(slot.max()) + 1 if len(slot) else 1) + slot
    edge_order = torch.argsort(key)
    child, head, slot = child[edge_order], head[edge_order], slot[edge_order]
    edge_counts = torch.bincount(height[head], minlength=len(counts)).tolist()
    levels, n0, e0 = [], 0, 0
    for p, e in zip(counts, edge_counts):
        levels.append(Level(order[n0 : n0 + p], child[e0 : e0 + e], rank[head[e0 : e0 + e]], slot[e0 : e0 + e]))
        n0, e0 = n0 + p, e0 + e
    # who reads each node's state: the level of its head (roots: a level past the last), and where in
    # that level's sorted edge list it sits
    num_levels = len(counts)
    reader = torch.full_like(height, num_levels)
    reader[child] = height[head]
    where = torch.zeros_like(height)
    where[child] = torch.arange(len(child)) - torch.cumsum(torch.tensor([0] + edge_counts[:-1]), 0).repeat_interleave(
        torch.tensor(edge_counts)
    )
    received: list[list[torch.Tensor]] = [[] for _ in range(num_levels)]
    for k, lv in enumerate(levels):
        key = reader[lv.nodes] * (len(order) + 1) + where[lv.nodes]
        lv.outbox = torch.argsort(key)
        lv.sends = torch.bincount(reader[lv.nodes], minlength=num_levels + 1)[k + 1 :].tolist()
        by_reader = where[lv.nodes][lv.outbox]
        for j, part in zip(range(k + 1, num_levels), by_reader.split(lv.sends)):  # the last part: roots
            received[j].append(part)
    for k, lv in enumerate(levels):
        lv.inbox = torch.argsort(torch.cat(received[k])) if received[k] else torch.zeros(0, dtype=torch.long)
    return levels


# --------------------------------------------------------------------------------------------
# Cells. ``project`` computes every node's input terms at once (W x: they need no children);
# ``step`` updates the P nodes of one level from those and their children's states (fast path);
# ``message``/``reduce``/``apply`` are the same cell as DGL UDFs (reference path).
# ``state`` is a tuple of (N, d) tensors: (h, c) for the LSTMs, (h,) for deepsets.
# --------------------------------------------------------------------------------------------
class ChildSumTreeLSTMCell(nn.Module):
    """i, o, u = σ, σ, tanh(W x + U Σ_k h_k);  f_k = σ(W_f x + U_f h_k);  c = i⊙u + Σ_k f_k⊙c_k;  h = o⊙tanh(c)."""

    num_states = 2

    def __init__(self, dim: int):
        super().__init__()
        self.W_iou, self.U_iou = nn.Linear(dim, 3 * dim), nn.Linear(dim, 3 * dim, bias=False)
        self.W_f, self.U_f = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False)

    def _update(self, wx_iou, h_sum, fc_sum):
        i, o, u = (wx_iou + self.U_iou(h_sum)).chunk(3, dim=-1)  # (P, d) each
        c = torch.sigmoid(i) * torch.tanh(u) + fc_sum
        return torch.sigmoid(o) * torch.tanh(c), c

    def project(self, x):
        """The input terms of every node at once, (N, 3d) and (N, d): they do not wait for children."""
        return torch.cat([self.W_iou(x), self.W_f(x)], -1)

    def step(self, wx, child_state, parent, slot, num):
        h_k, c_k = child_state  # (E, d)
        wx_iou, wx_f = wx.split([3 * h_k.shape[1], h_k.shape[1]], -1)
        h_sum = wx.new_zeros(num, h_k.shape[1]).index_add(0, parent, h_k)  # (P, d)
        f = torch.sigmoid(wx_f[parent] + self.U_f(h_k))  # (E, d) one forget gate per child
        return self._update(wx_iou, h_sum, wx.new_zeros(num, h_k.shape[1]).index_add(0, parent, f * c_k))

    def message(self, edges):
        return {"h": edges.src["h"], "c": edges.src["c"]}

    def reduce(self, nodes):
        h_k, c_k = nodes.mailbox["h"], nodes.mailbox["c"]  # (P, K, d)
        f = torch.sigmoid(self.W_f(nodes.data["x"]).unsqueeze(1) + self.U_f(h_k))
        return {"h_sum": h_k.sum(1), "fc_sum": (f * c_k).sum(1)}

    def apply(self, nodes):
        x = nodes.data["x"]
        zero = torch.zeros_like(x)  # a leaf has no children, so DGL runs no reduce for it
        h, c = self._update(self.W_iou(x), nodes.data.get("h_sum", zero), nodes.data.get("fc_sum", zero))
        return {"h": h, "c": c}


class NaryTreeLSTMCell(nn.Module):
    """Tai et al.'s N-ary Tree-LSTM (their eqs. 9-14): the children's states sit in N slots (left,
    right for N = 2), each with its own weights: i, o, u from W x + Σ_l U_l h_l; one forget gate per
    slot, f_l = σ(W_f x + Σ_k U_f,lk h_k) (W_f and its bias shared by the slots, as in the paper)."""

    num_states = 2

    def __init__(self, dim: int, arity: int = 2):
        super().__init__()
        self.dim, self.arity = dim, arity
        self.W_iou, self.U_iou = nn.Linear(dim, 3 * dim), nn.Linear(arity * dim, 3 * dim, bias=False)
        self.W_f, self.U_f = nn.Linear(dim, dim), nn.Linear(arity * dim, arity * dim, bias=False)

    def _update(self, wx, h_slots, c_slots):
        """``wx``: (P, 4d) the input terms; ``h_slots``, ``c_slots``: (P, N, d), zeros where a slot is empty."""
        wx_iou, wx_f = wx.split([3 * self.dim, self.dim], -1)
        h_cat = h_slots.flatten(1)  # (P, N d)
        i, o, u = (wx_iou + self.U_iou(h_cat)).chunk(3, dim=-1)
        f = torch.sigmoid(wx_f.unsqueeze(1) + self.U_f(h_cat).view_as(c_slots))  # (P, N, d) one gate per slot
        c = torch.sigmoid(i) * torch.tanh(u) + (f * c_slots).sum(1)
        return torch.sigmoid(o) * torch.tanh(c), c

    def project(self, x):
        """The input terms of every node at once, (N, 4d)."""
        return torch.cat([self.W_iou(x), self.W_f(x)], -1)

    def _check(self, slot):
        if len(slot) and int(slot.max()) >= self.arity:
            raise ValueError(
                f"model.cell=binary reads at most {self.arity} ordered children per node, found a node with "
                f"{int(slot.max()) + 1}: use graph=binary_tree, or model.cell=childsum on graph=tree"
            )

    def step(self, wx, child_state, parent, slot, num):
        self._check(slot)
        if len(parent) == num * self.arity:  # every head full: the edges come sorted by (head, slot)
            return self._update(wx, *(s.view(num, self.arity, self.dim) for s in child_state))
        slots = []
        for s in child_state:  # (E, d) -> (P, N, d), zeros in the empty slots
            out = wx.new_zeros(num, self.arity, self.dim)
            slots.append(out.index_put((parent, slot), s))
        return self._update(wx, *slots)

    def message(self, edges):
        return {"h": edges.src["h"], "c": edges.src["c"], "slot": edges.src["slot"]}

    def reduce(self, nodes):
        h_k, c_k, slot = nodes.mailbox["h"], nodes.mailbox["c"], nodes.mailbox["slot"]  # (P, K, d), (P, K)
        self._check(slot.flatten())
        onehot = nn.functional.one_hot(slot, self.arity).to(h_k)  # (P, K, N): put child k in its slot
        return {"h_slots": onehot.transpose(1, 2) @ h_k, "c_slots": onehot.transpose(1, 2) @ c_k}

    def apply(self, nodes):
        x = nodes.data["x"]
        zero = x.new_zeros(x.shape[0], self.arity, self.dim)
        h, c = self._update(self.project(x), nodes.data.get("h_slots", zero), nodes.data.get("c_slots", zero))
        return {"h": h, "c": c}


class DeepSetsCell(nn.Module):
    """h = LN(MLP([x ; Σ_k φ(h_k)])), φ = ReLU(Linear): a sum over the children that can count."""

    num_states = 1

    def __init__(self, dim: int, mult: int = 2):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())
        self.mlp = nn.Sequential(nn.Linear(2 * dim, mult * dim), nn.ReLU(), nn.Linear(mult * dim, dim))
        self.norm = nn.LayerNorm(dim)

    def _update(self, x, phi_sum):
        return (self.norm(self.mlp(torch.cat([x, phi_sum], -1))),)

    def project(self, x):
        return x  # the input enters the MLP with the children's sum

    def step(self, x, child_state, parent, slot, num):
        (h_k,) = child_state
        return self._update(x, x.new_zeros(num, x.shape[1]).index_add(0, parent, self.phi(h_k)))

    def message(self, edges):
        return {"m": self.phi(edges.src["h"])}

    def reduce(self, nodes):
        return {"phi_sum": nodes.mailbox["m"].sum(1)}

    def apply(self, nodes):
        x = nodes.data["x"]
        return {"h": self._update(x, nodes.data.get("phi_sum", torch.zeros_like(x)))[0]}


def make_cell(name: str, dim: int) -> nn.Module:
    if name == "childsum":
        return ChildSumTreeLSTMCell(dim)
    if name == "binary":
        return NaryTreeLSTMCell(dim, arity=2)
    if name == "deepsets":
        return DeepSetsCell(dim)
    raise ValueError(f"unknown model.cell {name!r}; valid: {', '.join(CELLS)}")


def check_recursive(model: str, cell: str, graph: str | None, readout: str = "root") -> None:
    """The one rule of what a recursive model can run on (train.py checks it before any work, and
    ``build_model`` again): a known cell, a graph with a tree, two ordered children for the binary cell."""
    if cell not in CELLS:
        raise ValueError(f"unknown model.cell {cell!r}; valid: {', '.join(CELLS)}")
    if graph is not None and (graph not in GRAPH_KINDS or not GRAPH_KINDS[graph].is_tree):
        raise ValueError(
            f"model={model} walks a tree from the leaves up, and graph={graph} has no tree "
            f"(no child -> head direction): use graph={' or graph='.join(tree_graphs())}"
        )
    if cell == "binary" and graph is not None and not GRAPH_KINDS[graph].binary:
        binary = " or graph=".join(k.name for k in GRAPH_KINDS.values() if k.binary)
        raise ValueError(f"model.cell=binary reads two ordered children per node: use graph={binary}")
    if readout not in ("root", "mean"):
        raise ValueError(f"model={model} reads out the root or the mean of the tokens: set model.readout=root")


# --------------------------------------------------------------------------------------------
# The model: embed tokens, run the cell up the tree, classify the root
# --------------------------------------------------------------------------------------------
class RecursiveEncoder(nn.Module):
    """Tree -> class logits: ``x_i = Embed(tok_i)``, the cell from the leaves up, a classifier on
    the root's h (``readout=root``; with ``readout=mean`` the mean of the token nodes' h)."""

    impl: str  # sparse | dense | auto (models.registry.Model: evaluate.py's impl= sets it)

    def __init__(self, config: RecursiveConfig, vocab_size: int, num_classes: int, embed: nn.Module | None = None):
        """Every knob comes from ``config`` (checked when it was made; ``models.registry.yaml_config(name,
        **overrides)`` makes one outside train.py). ``embed``: a given embedding table (GloVe), else a learned one."""
        super().__init__()
        cell, hidden_dim, dropout = config.cell, config.hidden_dim, config.dropout
        self.hidden_dim, self.readout, self.cell_name = hidden_dim, config.readout, cell
        # a given table (models/embeddings.py: GloVe) maps token ids to hidden_dim as nn.Embedding does
        self.embed = embed if embed is not None else nn.Embedding(vocab_size, hidden_dim)
        self.cell = make_cell(cell, hidden_dim)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden_dim, num_classes)
        self.record_attention = False  # the analysis tools ask every model; there is no attention here
        # Only index tensors leave the graph, so the graphs may stay on the CPU while the model runs on a
        # GPU (as the synchronous models' dense path does): train.py/evaluate.py read this to place them.
        self.impl = "auto"

    def _inputs(self, g: dgl.DGLGraph) -> torch.Tensor:
        return self.dropout(self.embed(g.ndata["tok"].to(self.classifier.weight.device)))  # (N, d)

    def node_states(self, g: dgl.DGLGraph) -> torch.Tensor:
        """h (N, d) of every node, level by level (the fast path)."""
        levels = schedule(g)
        x = self._inputs(g)
        wx = self.cell.project(x)  # every node's input terms at once: they do not wait for the children
        dev, d = x.device, x.shape[1]
        width = self.cell.num_states * d  # a state is [h | c] side by side (deepsets: h)
        order = torch.cat([lv.nodes for lv in levels]).to(dev)  # the nodes in level order
        wx_levels = wx[order].split([len(lv.nodes) for lv in levels])  # views: one gather for all levels
        mail: list[list[torch.Tensor]] = [[] for _ in levels]  # the child states each level will read
        outs = []
        for k, lv in enumerate(levels):
            parent, slot, inbox, outbox = (t.to(dev) for t in (lv.parent, lv.slot, lv.inbox, lv.outbox))
            children = torch.cat(mail[k])[inbox] if mail[k] else x.new_zeros(0, width)  # (E, S d) in edge order
            new = self.cell.step(wx_levels[k], children.split(d, -1), parent, slot, len(lv.nodes))
            out = torch.cat(new, -1)  # (P, S d)
            outs.append(out)
            for j, part in zip(range(k + 1, len(levels)), out[outbox].split(lv.sends)):  # the last part: roots
                if len(part):
                    mail[j].append(part)  # sent up to the level that reads it
        h = torch.cat(outs)[:, :d]  # (N, d) in level order
        return h.new_empty(h.shape).index_copy(0, order, h)  # back to node order

    def node_states_reference(self, g: dgl.DGLGraph) -> torch.Tensor:
        """The same h (N, d) by DGL's topological propagation: ``dgl.prop_nodes_topo`` visits the
        child -> head graph frontier by frontier, leaves first (slow; for reading and for tests)."""
        child, head = child_edges(g)
        t = dgl.graph((child, head), num_nodes=g.num_nodes())
        x = self._inputs(g)
        t.ndata["x"], t.ndata["slot"] = x, g.ndata["slot"]
        for key in ("h", "c")[: self.cell.num_states]:
            t.ndata[key] = torch.zeros_like(x)
        dgl.prop_nodes_topo(
            t, message_func=self.cell.message, reduce_func=self.cell.reduce, apply_node_func=self.cell.apply
        )
        return t.ndata["h"]

    def readout_logits(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        if self.readout == "root":
            hg = h[g.ndata["root"].to(h.device)]  # (B, d) one root per tree
        else:  # the mean of each graph's token nodes, in plain torch: the graph may stay on the CPU
            sizes = g.batch_num_nodes().to(h.device)
            graph_id = torch.repeat_interleave(torch.arange(len(sizes), device=h.device), sizes)  # (N,)
            is_token = (g.ndata["pos"] >= 0).to(h.device).float().unsqueeze(-1)  # (N, 1)
            total = h.new_zeros(len(sizes), h.shape[1]).index_add(0, graph_id, h * is_token)
            hg = total / h.new_zeros(len(sizes), 1).index_add(0, graph_id, is_token).clamp(min=1)
        return self.classifier(self.dropout(hg))  # (B, C)

    def forward(self, g: dgl.DGLGraph, nodes: bool = False):
        """Class logits (B, C); with ``nodes``, also every node's logits (N, C): Tai et al. (2015) classify
        every phrase of SST with the classifier of the root. In float32 under ``trainer.precision=bf16``: the
        level-by-level scatter of states takes one dtype."""
        with torch.autocast(self.classifier.weight.device.type, enabled=False):
            h = self.node_states(g)
            if nodes:
                return self.readout_logits(g, h), self.classifier(self.dropout(h))
            return self.readout_logits(g, h)

    def forward_reference(self, g: dgl.DGLGraph) -> torch.Tensor:
        return self.readout_logits(g, self.node_states_reference(g))


# --------------------------------------------------------------------------------------------
# The family: its model names (each with its default cell), its typed config, its builder
# --------------------------------------------------------------------------------------------
RECURSIVE_MODELS = {"treelstm": "childsum", "recursive": "deepsets"}  # name -> the cell when model.cell is null


@dataclass(frozen=True)
class RecursiveConfig(EmbeddingOptions):
    """The keys conf/model/treelstm.yaml and recursive.yaml carry. Checked once, when made."""

    name: str
    cell: str | None
    hidden_dim: int
    dropout: float
    readout: str

    family = "recursive"
    impl = "auto"  # only index tensors leave the graphs: they may stay on the CPU beside a GPU model

    @classmethod
    def from_mapping(cls, cfg: Mapping) -> RecursiveConfig:
        values = typed_fields(cls, {"cell": None, **cfg})  # a config may leave the cell to the model name
        return cls(**{**values, "cell": values["cell"] or RECURSIVE_MODELS[values["name"]]})

    def __post_init__(self):
        self.check_embeddings()
        if not isinstance(self.hidden_dim, int) or isinstance(self.hidden_dim, bool) or self.hidden_dim < 1:
            raise ValueError(f"model.hidden_dim must be an integer >= 1, got {self.hidden_dim!r}")
        check_recursive(self.name, self.cell, None, self.readout)

    def check(self, graph: GraphKind) -> None:
        check_recursive(self.name, self.cell, graph.name, self.readout)


def build_recursive(config: RecursiveConfig, vocab_size, num_classes: int, construction=None) -> RecursiveEncoder:
    """``vocab_size``: the vocabulary's size, or the ``Vocab`` itself (which ``model.embeddings=glove`` needs)."""
    embed = make_embedding(config, vocab_size, config.hidden_dim)
    return RecursiveEncoder(config, len_of(vocab_size), num_classes, embed)


register_family(
    ModelFamily(
        "recursive",
        models=tuple(RECURSIVE_MODELS),
        config=RecursiveConfig,
        build=build_recursive,
        description="one pass up the tree, children first (Tree-LSTM, recursive Deep Sets)",
        memory="one_pass",
        takes_vocab=True,
    )
)
