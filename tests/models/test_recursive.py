"""Recursive models (models/recursive.py), the binarised tree, edge types and bare digits.

* The binarisation is checked against hand-worked trees and against the published files'
  parentheses (``data.listops.binarised_string``) on generated expressions.
* Each cell's fast level-by-level path is checked against (a) a recursive reference written here
  by hand, one tree at a time, children first, from the cell's own equations, and (b) DGL's
  ``prop_nodes_topo``, in outputs and gradients, with the batch in any order.
"""

import csv
import random

import dgl
import pytest
import torch

from data import listops
from data.graphs import (
    FROM_CHILD,
    FROM_HEAD,
    FROM_LEFT,
    FROM_RIGHT,
    SELF,
    GraphConstruction,
    binarise,
    edge_types,
    tree_schedule,
)
from data.vocab import Vocab
from engine.config import check_config, parse_parts
from models.recursive import RecursiveEncoder, schedule
from tests.conftest import assert_breakdowns_match_test_acc, compose_config, rescored_test_acc
from tests.helpers.encoders import graph_encoder, recursive_encoder
from train import run

# [MAX 2 9 ]: tokens 0 [MAX, 1 2, 2 9, 3 ]; phrases 4 = ([MAX 2), 5 = (4 9), 6 = (5 ]) the root
MAX_2_9 = (["[MAX", "2", "9", "]"], [-1, 0, 0, 0], [4, 4, 5, 6, 5, 6, -1], [0, 1, 1, 1, 0, 0, -1])


def render(tokens: list[str], parent: list[int], slot: list[int]) -> str:
    """A binarised tree written with parentheses, as the published files write it."""
    kids = [[] for _ in parent]
    for i in sorted(range(len(parent)), key=lambda i: slot[i]):
        if parent[i] >= 0:
            kids[parent[i]].append(i)

    def out(i):
        if i < len(tokens):
            return tokens[i]
        assert len(kids[i]) == 2, "every phrase node has two children"
        return f"( {out(kids[i][0])} {out(kids[i][1])} )"

    return out(parent.index(-1))


# --------------------------------------------------------------------------------------------
# Binarisation and the schedule
# --------------------------------------------------------------------------------------------
def test_binarise_hand_worked():
    tokens, heads, parent, slot = MAX_2_9
    assert binarise(heads) == (parent, slot)
    assert render(tokens, parent, slot) == "( ( ( [MAX 2 ) 9 ) ] )"
    # [MAX 2 [MIN 4 7 ] 0 ]: [MIN's phrases (8, 9, 10) are made before [MAX's (11..14)
    parent, slot = binarise([-1, 0, 0, 2, 2, 2, 0, 0])
    assert parent == [11, 11, 8, 8, 9, 10, 13, 14, 9, 10, 12, 12, 13, 14, -1]
    assert slot == [0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, -1]
    tok = "[MAX 2 [MIN 4 7 ] 0 ]".split()
    assert render(tok, parent, slot) == "( ( ( ( [MAX 2 ) ( ( ( [MIN 4 ) 7 ) ] ) ) 0 ) ] )"
    assert binarise([-1]) == ([-1], [-1])  # a bare digit: one node, no phrase


def test_binarise_gives_the_published_parentheses():
    for ex in listops.generate(300, seed=7, root_operator=False):
        parent, slot = binarise(ex["heads"])
        assert len(parent) == len(ex["tokens"]) + sum(h >= 0 for h in ex["heads"])  # a phrase per dependent
        assert render(ex["tokens"], parent, slot) == listops.binarised_string(ex["tokens"])


def test_tree_schedule_hand_worked():
    slot, height = tree_schedule(MAX_2_9[2], MAX_2_9[3])
    assert slot == MAX_2_9[3]
    assert height == [0, 0, 0, 0, 1, 2, 3]
    g = GraphConstruction("binary_tree")([5, 6, 7, 8], MAX_2_9[1])
    assert g.ndata["slot"].tolist() == MAX_2_9[3]  # the phrase (left) before the new dependent (right)
    slot, height = tree_schedule([-1, 0, 0, 2, 2, 2, 0, 0])  # the n-ary gold tree
    assert slot == [-1, 0, 1, 0, 1, 2, 2, 3]
    assert height == [2, 0, 1, 0, 0, 0, 0, 0]


def test_edge_types_know_direction():
    parent = torch.tensor([-1, 0, 0])
    src, dst = torch.tensor([1, 0, 0, 2, 1]), torch.tensor([0, 1, 0, 1, 2])
    assert edge_types(src, dst, parent).tolist() == [FROM_CHILD, FROM_HEAD, SELF, FROM_RIGHT, FROM_LEFT]
    g = GraphConstruction("binary_tree")([5, 6, 7, 8], MAX_2_9[1])
    up = g.edata["etype"] == FROM_CHILD
    s, d = g.edges()
    assert sorted(zip(s[up].tolist(), d[up].tolist())) == [(0, 4), (1, 4), (2, 5), (3, 6), (4, 5), (5, 6)]
    assert g.ndata["root"].tolist() == [False] * 6 + [True]
    assert g.ndata["pos"].tolist() == [0, 1, 2, 3, -1, -1, -1]
    assert g.ndata["tok"].tolist()[4:] == [3, 3, 3]  # <phrase>


def test_schedule_levels_cover_every_node_once():
    con = GraphConstruction("tree")
    exs = list(listops.generate(20, seed=2, root_operator=True))
    g = dgl.batch([con([4] * len(e["tokens"]), e["heads"]) for e in exs])
    levels = schedule(g)
    seen = torch.cat([lv.nodes for lv in levels])
    assert sorted(seen.tolist()) == list(range(g.num_nodes()))
    done = set()
    for lv in levels:  # every child is finished before its head's level
        assert set(lv.child.tolist()) <= done
        assert (lv.parent < len(lv.nodes)).all()
        done |= set(lv.nodes.tolist())


# --------------------------------------------------------------------------------------------
# The cells against a recursive reference written from their equations
# --------------------------------------------------------------------------------------------
def reference_states(model: RecursiveEncoder, tok: list[int], parent: list[int], slot: list[int]) -> torch.Tensor:
    """h of every node of one tree, by plain recursion, children first, from the cell's equations."""
    cell, x_all = model.cell, model.embed.weight[torch.tensor(tok)]
    kids = [[] for _ in parent]
    for i in sorted(range(len(parent)), key=lambda i: slot[i]):  # left child first
        if parent[i] >= 0:
            kids[parent[i]].append(i)
    h, c = {}, {}
    sig = torch.sigmoid

    def visit(i):
        for k in kids[i]:
            visit(k)
        x = x_all[i]
        if model.cell_name == "childsum":
            hs = sum((h[k] for k in kids[i]), torch.zeros_like(x))
            iou = cell.W_iou(x) + cell.U_iou(hs)
            ig, og, u = iou.chunk(3)
            cs = sum((sig(cell.W_f(x) + cell.U_f(h[k])) * c[k] for k in kids[i]), torch.zeros_like(x))
            c[i] = sig(ig) * torch.tanh(u) + cs
            h[i] = sig(og) * torch.tanh(c[i])
        elif model.cell_name == "binary":
            assert len(kids[i]) in (0, 2)
            hl, hr = (h[kids[i][0]], h[kids[i][1]]) if kids[i] else (torch.zeros_like(x), torch.zeros_like(x))
            cl, cr = (c[kids[i][0]], c[kids[i][1]]) if kids[i] else (torch.zeros_like(x), torch.zeros_like(x))
            hcat = torch.cat([hl, hr])
            ig, og, u = (cell.W_iou(x) + cell.U_iou(hcat)).chunk(3)
            fl, fr = sig(cell.W_f(x).repeat(2) + cell.U_f(hcat)).chunk(2)  # W_f x shared by both slots
            c[i] = sig(ig) * torch.tanh(u) + fl * cl + fr * cr
            h[i] = sig(og) * torch.tanh(c[i])
        else:
            s = sum((cell.phi(h[k]) for k in kids[i]), torch.zeros_like(x))
            h[i] = cell.norm(cell.mlp(torch.cat([x, s])))

    visit(parent.index(-1))
    return torch.stack([h[i] for i in range(len(parent))])


CASES = [("tree", "childsum"), ("tree", "deepsets"), ("binary_tree", "childsum"), ("binary_tree", "binary"),
         ("binary_tree", "deepsets")]  # fmt: skip


def small_trees(graph: str, num: int = 12, seed: int = 0):
    exs = list(listops.generate(num, seed=seed, max_length=30, root_operator=True))
    exs.append(listops.make_example(["7"]))  # a bare digit: one node
    vocab = Vocab.build([e["tokens"] for e in exs])
    con = GraphConstruction(graph, phrase_id=vocab.phrase_id)
    return exs, vocab, [con(vocab.encode(e["tokens"]), e["heads"]) for e in exs]


@pytest.mark.parametrize("graph,cell", CASES)
def test_fast_path_equals_hand_written_recursion(graph, cell):
    exs, vocab, graphs = small_trees(graph)
    torch.manual_seed(0)
    m = recursive_encoder(len(vocab), 10, cell=cell, hidden_dim=12).eval()
    order = list(range(len(graphs)))
    random.Random(1).shuffle(order)  # any batch order
    g = dgl.batch([graphs[i] for i in order])
    h = m.node_states(g)
    offsets = torch.cumsum(g.batch_num_nodes(), 0) - g.batch_num_nodes()
    for b, i in enumerate(order):
        gi = graphs[i]
        expected = reference_states(m, gi.ndata["tok"].tolist(), gi.ndata["parent"].tolist(), gi.ndata["slot"].tolist())
        got = h[offsets[b] : offsets[b] + gi.num_nodes()]
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("graph,cell", CASES)
def test_fast_path_equals_dgl_prop_nodes_topo(graph, cell):
    exs, vocab, graphs = small_trees(graph, seed=3)
    torch.manual_seed(0)
    m = recursive_encoder(len(vocab), 10, cell=cell, hidden_dim=12).eval()
    g = dgl.batch(graphs)
    weights = torch.linspace(-1, 1, 10 * len(graphs)).view(len(graphs), 10)
    grads = []
    for forward in (m.forward, m.forward_reference):
        m.zero_grad()
        out = forward(g)
        (out * weights).sum().backward()
        grads.append((out.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}))
    (fast, fast_g), (ref, ref_g) = grads
    torch.testing.assert_close(fast, ref, atol=1e-5, rtol=0)
    assert fast_g.keys() == ref_g.keys() and len(fast_g) >= 4
    for n in fast_g:
        torch.testing.assert_close(fast_g[n], ref_g[n], atol=1e-5, rtol=0, msg=n)


def test_binary_cell_refuses_a_wide_tree():
    _, vocab, graphs = small_trees("tree")
    m = recursive_encoder(len(vocab), 10, cell="binary", hidden_dim=8)
    with pytest.raises(ValueError, match="use graph=binary_tree"):
        m(dgl.batch(graphs))


def test_recursive_models_refuse_graphs_without_a_tree():
    with pytest.raises(ValueError, match="has no tree"):
        check_config(compose_config(["model=treelstm", "graph=complete"]))
    with pytest.raises(ValueError, match="use graph=binary_tree"):
        check_config(compose_config(["model=treelstm", "model.cell=binary", "graph=tree"]))
    with pytest.raises(ValueError, match="valid: childsum, binary, deepsets"):
        check_config(compose_config(["model=treelstm", "model.cell=gru", "graph=tree"]))
    cfg = compose_config(["model=recursive", "graph=window"])
    with pytest.raises(ValueError, match="has no tree"):  # the one check of model against graph (a checkpoint's too)
        parse_parts({"model": cfg.model, "graph": cfg.graph})
    m = recursive_encoder(20, 10)
    g = GraphConstruction("complete")([4, 5, 6])
    with pytest.raises(ValueError, match="need a tree to walk"):
        m(g)


# --------------------------------------------------------------------------------------------
# A bare digit through every model
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("graph", ["complete", "tree", "binary_tree", "window", "knn", "none"])
@pytest.mark.parametrize("impl", ["sparse", "dense"])
def test_bare_digit_through_every_synchronous_model(graph, impl):
    con = GraphConstruction(graph, k=3)
    alone = con([7], [-1])
    assert alone.num_nodes() == 1
    pair = dgl.batch([alone, con([4, 7, 7, 5], [-1, 0, 0, 0])])
    for name in ("gcn", "gat", "transformer", "sum", "mean", "max"):
        torch.manual_seed(0)
        m = graph_encoder(20, 10, aggregator=name, hidden_dim=16, num_layers=2, construction=con, impl=impl,
                         readout="root", edge_types=True).eval()  # fmt: skip
        out = m(alone)
        assert out.shape == (1, 10) and torch.isfinite(out).all()
        torch.testing.assert_close(m(pair)[0], out[0], atol=1e-5, rtol=0)  # batching changes nothing


@pytest.mark.parametrize("graph,cell", CASES)
def test_bare_digit_through_every_recursive_model(graph, cell):
    con = GraphConstruction(graph)
    alone = con([7], [-1])
    m = recursive_encoder(20, 10, cell=cell, hidden_dim=8).eval()
    out = m(alone)
    assert out.shape == (1, 10)
    torch.testing.assert_close(m(dgl.batch([alone, con([4, 7, 7, 5], [-1, 0, 0, 0])]))[0], out[0])


# --------------------------------------------------------------------------------------------
# They learn, from the command line's config
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides",
    [
        ["model=treelstm", "graph=tree"],
        ["model=treelstm", "model.cell=binary", "graph=binary_tree"],
        ["model=recursive", "graph=tree"],
        ["model=sum", "graph=tree", "model.edge_types=true", "model.update=gru", "model.share_weights=true"],
        ["model=transformer", "graph=binary_tree", "model.edge_types=true", "model.readout=root"],
    ],
)
def test_recursive_and_typed_models_train(overrides, tmp_path, tiny_overrides):
    cfg = compose_config(tiny_overrides + overrides + ["trainer.max_epochs=3", "optim.lr=3e-3", "model.hidden_dim=32"])
    results = run(cfg, tmp_path)
    with open(tmp_path / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"]), rows
    assert results["model"] == cfg.model.name
    assert_breakdowns_match_test_acc(results)
    assert rescored_test_acc(tmp_path, tmp_path / "eval") == results["test_acc"]  # best.pt scores what it reported


# --------------------------------------------------------------------------------------------
# A published-layout file with a bare digit, scored by a recursive checkpoint
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,graph,cell", [("treelstm", "binary_tree", "binary"), ("recursive", "tree", "deepsets")])
def test_published_layout_file_with_a_bare_digit_evaluates(model, graph, cell, tmp_path, tiny_overrides):
    from evaluate import evaluate

    run_dir = tmp_path / "run"
    cfg = compose_config(tiny_overrides + [f"model={model}", f"graph={graph}", f"model.cell={cell}"])
    run(cfg, run_dir)
    data_file = tmp_path / "published.tsv"
    assert listops.main(["--num", "40", "--seed", "5", "--max-length", "40", "--out", str(data_file)]) == 0
    lines = data_file.read_text().splitlines()
    assert any(line.count("(") > 2 for line in lines)  # the published parentheses
    data_file.write_text("9\t9\n" + "\n".join(lines) + "\n")  # the published test file's bare digit
    eval_cfg = compose_config([f"checkpoint={run_dir / 'checkpoints' / 'best.pt'}", f"data_file={data_file}"],
                              config_name="evaluate")  # fmt: skip
    result = evaluate(eval_cfg, tmp_path / "eval")
    assert result["num_examples"] == len(lines) + 1
    assert result["by_depth"]["0"]["n"] >= 1 and result["by_root"]["digit"]["n"] >= 1


def test_mean_readout_averages_token_nodes_only():
    exs, vocab, graphs = small_trees("binary_tree", num=4)
    torch.manual_seed(0)
    m = recursive_encoder(len(vocab), 10, cell="deepsets", hidden_dim=8, readout="mean").eval()
    g = dgl.batch(graphs)
    h = m.node_states(g)
    sizes = g.batch_num_nodes().tolist()
    parts = torch.split(h, sizes)
    pos = torch.split(g.ndata["pos"], sizes)
    expected = torch.stack([p[q >= 0].mean(0) for p, q in zip(parts, pos)])  # phrase nodes (pos -1) left out
    torch.testing.assert_close(m.readout_logits(g, h), m.classifier(expected))


def test_cls_readout_refused_on_binary_tree():
    with pytest.raises(ValueError, match="use model.readout=root"):
        GraphConstruction("binary_tree", cls_id=2)
