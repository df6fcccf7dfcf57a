"""The pieces the essay's experiments add: attention-free aggregators, head masks, the unscaled dot
product, structural positional encodings, the attention-vs-tree analysis and head pruning, and every
conf/experiment file."""

import csv
import json
import re
from pathlib import Path

import dgl
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from omegaconf import OmegaConf

from data import listops
from data.graphs import GraphConstruction, complete_edges, laplacian_pe, random_walk_pe, tree_edges
from models.aggregators import AGGREGATORS, DotProductAttention, PoolAggregation
from models.dense import to_dense
from models.encoder import GraphEncoder
from tests.conftest import CONF, compose_config
from tools import attention_syntax, prune_heads, results_table
from train import run

EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def listops_batch(construction, num=6, seed=1, max_length=30):
    examples = list(listops.generate(num, seed=seed, max_length=max_length))
    ids = {t: i + 3 for i, t in enumerate(listops.TOKENS)}
    return dgl.batch([construction([ids[t] for t in ex["tokens"]], ex["heads"]) for ex in examples]), examples


# --------------------------------------------------------------------------------------------
# Attention-free aggregation: sum, mean, max of the neighbours, by hand
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_pool_aggregation_matches_a_loop_over_neighbours(reduce):
    torch.manual_seed(0)
    heads = [-1, 0, 0, 2, 2, 2, 0]
    src, dst = tree_edges(heads, self_loops=False)
    g = dgl.graph((src, dst), num_nodes=len(heads) + 1)  # node 7: no incoming edge
    agg = PoolAggregation(8, reduce=reduce)
    h = torch.randn(g.num_nodes(), 8)
    out = agg(g, h)
    for i in range(g.num_nodes()):
        nbrs = src[dst == i]
        if len(nbrs) == 0:
            expected = agg.linear(torch.zeros(8))
        else:
            m = {"sum": h[nbrs].sum(0), "mean": h[nbrs].mean(0), "max": h[nbrs].max(0).values}[reduce]
            expected = agg.linear(m)
        torch.testing.assert_close(out[i], expected, atol=1e-6, rtol=1e-5)
    dense = agg.forward_dense(h[None], to_dense(g, "cpu"))[0]
    torch.testing.assert_close(dense, out, atol=1e-5, rtol=1e-5)


def test_sum_sees_multiplicity_mean_and_max_do_not():
    """GIN's point (Xu et al., 2019): a node with neighbours {a, a} and one with {a} differ under sum only."""
    g = dgl.graph(([1, 2, 4], [0, 0, 3]), num_nodes=5)  # node 0 hears 1 and 2, node 3 hears 4
    h = torch.ones(5, 4)
    outs = {r: PoolAggregation(4, reduce=r)(g, h) for r in ("sum", "mean", "max")}
    for r, out in outs.items():
        agg_same = torch.allclose(out[0], out[3])
        assert agg_same == (r != "sum"), r


def test_unknown_reduction_is_a_clear_error():
    with pytest.raises(ValueError, match="valid: sum, mean, max"):
        PoolAggregation(4, reduce="median")


# --------------------------------------------------------------------------------------------
# Head masks and the unscaled dot product
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gat", "transformer"])
def test_masking_a_head_removes_exactly_its_contribution(name):
    torch.manual_seed(0)
    agg = AGGREGATORS[name](16, num_heads=4).eval()
    g = dgl.graph(complete_edges(6))
    h = torch.randn(6, 16)
    full = agg(g, h)
    agg.head_mask = torch.ones(4)
    torch.testing.assert_close(agg(g, h), full)  # all ones: no change
    agg.head_mask = torch.tensor([1.0, 0.0, 1.0, 1.0])
    masked = agg(g, h)
    # by hand: the output projection of the concatenated heads, head 2's slice zeroed
    agg.head_mask, agg.record_attention = None, True
    agg(g, h)
    a = agg.last_attention  # (E, H)
    if name == "transformer":
        values = agg.value(h).view(6, 4, 4)
    else:
        values = agg.proj(h).view(6, 4, 4)
    src, dst = g.edges()
    heads = torch.zeros(6, 4, 4).index_add_(0, dst, a[:, :, None] * values[src])
    heads[:, 1] = 0
    torch.testing.assert_close(masked, agg.out(heads.flatten(1)), atol=1e-5, rtol=1e-5)
    agg.record_attention, agg.head_mask = False, torch.tensor([1.0, 0.0, 1.0, 1.0])
    dense = agg.forward_dense(h[None], to_dense(g, "cpu", complete=True))[0]  # the fused SDPA path
    torch.testing.assert_close(dense, masked, atol=1e-5, rtol=1e-5)
    agg.head_mask = torch.zeros(4)
    torch.testing.assert_close(agg(g, h), agg.out.bias.expand(6, -1))  # no head: only O's bias


def test_unscaled_dot_product_is_sdpa_with_scale_one():
    torch.manual_seed(0)
    agg = DotProductAttention(16, num_heads=2, scaled=False).eval()
    h = torch.randn(5, 16)
    out = agg(dgl.graph(complete_edges(5)), h)
    q, k, v = (m(h).view(5, 2, 8).transpose(0, 1) for m in (agg.query, agg.key, agg.value))
    ref = agg.out(F.scaled_dot_product_attention(q, k, v, scale=1.0).transpose(0, 1).flatten(1))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    scaled = DotProductAttention(16, num_heads=2, scaled=True).eval()
    scaled.load_state_dict(agg.state_dict())
    assert (scaled(dgl.graph(complete_edges(5)), h) - out).abs().max() > 1e-3  # the flag does something


# --------------------------------------------------------------------------------------------
# Structural positional encodings
# --------------------------------------------------------------------------------------------
def test_laplacian_pe_spans_the_same_eigenvectors_as_dgl():
    n, k = 9, 4  # a path: distinct eigenvalues, so each eigenvector is unique up to sign
    src, dst = torch.arange(n - 1), torch.arange(1, n)
    ours = laplacian_pe(src, dst, n, k)
    g = dgl.graph((torch.cat([src, dst]), torch.cat([dst, src])), num_nodes=n)
    theirs = dgl.lap_pe(g, k, padding=True)
    for j in range(k):
        cos = torch.dot(ours[:, j], theirs[:, j]) / (ours[:, j].norm() * theirs[:, j].norm())
        assert abs(cos.item()) > 0.99, (j, cos)
    # and each is a true eigenvector of the normalised Laplacian: L v = lambda v
    deg = torch.zeros(n).index_add_(0, src, torch.ones(n - 1)).index_add_(0, dst, torch.ones(n - 1))
    a = torch.zeros(n, n)
    a[src, dst] = a[dst, src] = 1
    lap = torch.eye(n) - a / (deg[:, None] * deg[None, :]).sqrt()
    lv = lap @ ours
    lam = (lv * ours).sum(0)
    torch.testing.assert_close(lv, ours * lam, atol=1e-5, rtol=1e-4)
    assert (lam[1:] > lam[:-1]).all()  # the smallest non-trivial ones, in order


def test_laplacian_pe_is_deterministic_padded_and_sign_fixed():
    heads = [-1, 0, 1, 1, 0]
    src, dst = tree_edges(heads, self_loops=False)
    pe = laplacian_pe(src, dst, 5, 8)
    assert pe.shape == (5, 8) and (pe[:, 4:] == 0).all()  # only n - 1 = 4 non-trivial eigenvectors
    torch.testing.assert_close(pe, laplacian_pe(src, dst, 5, 8))
    peak = pe[pe[:, :4].abs().argmax(0), torch.arange(4)]
    assert (peak > 0).all()


def test_random_walk_pe_return_probabilities():
    src, dst = torch.tensor([0, 0]), torch.tensor([1, 2])  # a star: 0 in the middle
    pe = random_walk_pe(src, dst, 3, 3)
    torch.testing.assert_close(pe[:, 0], torch.zeros(3))  # no self loops: no 1-step return
    torch.testing.assert_close(pe[:, 1], torch.tensor([1.0, 0.5, 0.5]))  # the hub always back; a leaf half the time
    torch.testing.assert_close(pe[:, 2], torch.zeros(3))  # bipartite: never after an odd number


def normalized_laplacian_eigs(adj: np.ndarray):
    """numpy's eigendecomposition of ``I - D^-1/2 A D^-1/2``, ascending: the reference laplacian_pe must match."""
    d = adj.sum(1) ** -0.5
    return np.linalg.eigh(np.eye(len(adj)) - d[:, None] * adj * d[None, :])


def random_walk_returns(adj: np.ndarray, k: int) -> np.ndarray:
    """(n, k) the diagonal of P, P^2, ..., P^k for the random walk P = D^-1 A, by numpy."""
    step = adj / adj.sum(1, keepdims=True)
    power, out = np.eye(len(adj)), []
    for _ in range(k):
        power = power @ step
        out.append(np.diag(power))
    return np.stack(out, 1)


@pytest.mark.parametrize("pe", ["lap_pe", "random_walk_pe"])
@pytest.mark.parametrize("pe_graph", ["tree", "chain", "graph"])
def test_constructions_carry_the_encoding(pe, pe_graph):
    """The construction's ndata['pe'] is the encoding of the graph pe_graph names, checked against numpy on
    adjacency matrices written out here (not against data.graphs' own functions)."""
    heads = [-1, 0, 0, 0, 1]  # 0 heads 1, 2, 3; 1 heads 4
    con = GraphConstruction(name="window", window=2, pe=pe, pe_dim=3, pe_graph=pe_graph, cls_id=2)
    g = con([5, 6, 7, 8, 9], heads)
    assert g.ndata["pe"].shape == (6, 3)
    assert (g.ndata["pe"][-1] == 0).all()  # <cls>
    pairs = {
        "tree": [(0, 1), (0, 2), (0, 3), (1, 4)],
        "chain": [(i, i + 1) for i in range(4)],
        "graph": [(i, j) for i in range(5) for j in range(i + 1, 5) if j - i <= 2],  # window=2, <cls> left out
    }[pe_graph]
    adj = np.zeros((5, 5))
    for i, j in pairs:
        adj[i, j] = adj[j, i] = 1.0
    ours = g.ndata["pe"][:5].double().numpy()
    if pe == "random_walk_pe":
        np.testing.assert_allclose(ours, random_walk_returns(adj, 3), atol=1e-6)
        return
    values, vectors = normalized_laplacian_eigs(adj)
    assert abs(values[0]) < 1e-9 and (np.diff(values[:5]) > 1e-3).all()  # connected; each eigenvector unique up to sign
    for j in range(3):  # the 3 smallest non-trivial eigenvalues' eigenvectors, each up to its sign
        ref = vectors[:, j + 1]
        sign = np.sign(ref @ ours[:, j])
        np.testing.assert_allclose(ours[:, j], sign * ref, atol=1e-5, err_msg=f"eigenvector {j + 1}")


def test_positional_encoding_errors_name_the_fix():
    with pytest.raises(ValueError, match="pe_graph=chain"):
        GraphConstruction(name="complete", pe="lap_pe")([1, 2, 3], None)
    for graph in ("knn", "none"):
        with pytest.raises(ValueError, match="use model.pe_graph=tree or chain"):
            GraphConstruction(name=graph, pe="lap_pe", pe_graph="graph")
    with pytest.raises(ValueError, match="valid: tree, chain, graph"):
        GraphConstruction(name="tree", pe="lap_pe", pe_graph="parse")
    model = GraphEncoder(20, 10, positional="lap_pe", construction=GraphConstruction(name="complete"))
    g, _ = listops_batch(GraphConstruction(name="complete"))
    with pytest.raises(ValueError, match="needs graphs built with it"):
        model(g)


@pytest.mark.parametrize("positional", ["lap_pe", "random_walk_pe"])
def test_structural_encodings_reach_the_model_in_both_impls(positional):
    torch.manual_seed(0)
    con = GraphConstruction(name="complete", pe=positional, pe_dim=6)
    g, _ = listops_batch(con)
    model = GraphEncoder(30, 10, positional=positional, pe_dim=6, construction=con).eval()
    sparse = model(g)
    model.impl = "dense"
    torch.testing.assert_close(model(g), sparse, atol=1e-5, rtol=1e-4)
    g.ndata["pe"] = torch.zeros_like(g.ndata["pe"])
    assert (model(g) - sparse).abs().max() > 1e-4  # the encoding changes the output
    if positional == "lap_pe":  # training flips eigenvector signs at random; evaluation never does
        g, _ = listops_batch(con)
        model.train()
        model.embed_dropout.p = 0.0
        for block in model.blocks:
            block.dropout.p = 0.0
        assert not torch.allclose(model(g), model(g))
        model.eval()
        torch.testing.assert_close(model(g), model(g))


# --------------------------------------------------------------------------------------------
# tools/attention_syntax.py and tools/prune_heads.py
# --------------------------------------------------------------------------------------------
def test_head_scores_on_attention_that_is_the_tree():
    """Head 0 attends only to each token's parent, head 1 only to itself (a self loop says nothing)."""
    heads = [-1, 0, 0, 2, 2]
    con = GraphConstruction(name="complete")
    g = con([3, 4, 5, 6, 7], heads)
    src, dst = g.edges()
    parent = attention_syntax.parents_of(g, [heads])
    attn = torch.zeros(g.num_edges(), 2)
    attn[:, 0] = ((parent[dst] == src) | ((parent[dst] < 0) & (src == 1))).float()  # the root looks at token 1
    attn[:, 1] = (src == dst).float()
    s = attention_syntax.head_scores(attn, src, dst, parent, g.ndata["pos"] >= 0)
    assert s["parent_n"] == 4 and s["parent"].tolist()[0] == 4  # every non-root token: its parent
    assert s["child_n"] == 2 and s["child"].tolist()[0] == 1  # the root's pick (token 1) is its child
    torch.testing.assert_close(s["mass"] / s["mass_n"], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(s["uniform"] / s["mass_n"], torch.tensor((2 / 5 + 1 / 5 + 3 / 5 + 1 / 5 + 1 / 5) / 5))
    assert s["parent"].tolist()[1] == 0 and s["child"].tolist()[1] == 0  # self-attention predicts nothing


def test_a_tie_for_the_most_attention_is_no_prediction():
    """Uniform attention ties every other token: no head is credited with the root (token 0) by index order."""
    heads = [-1, 0, 0, 1]
    g = GraphConstruction(name="complete")([3, 4, 5, 6], heads)
    src, dst = g.edges()
    parent = attention_syntax.parents_of(g, [heads])
    s = attention_syntax.head_scores(torch.full((g.num_edges(), 1), 0.25), src, dst, parent, g.ndata["pos"] >= 0)
    assert s["parent"].tolist() == [0] and s["child"].tolist() == [0]


def test_sister_pairs_of_a_gold_tree():
    """(the (lovely film)): the sister of `the` is `lovely film`; of `lovely`, `film`; of `film`, `lovely`."""
    parent = [4, 3, 3, 4, -1]  # tokens 0-2, phrase 3 = (lovely film), root 4 = (the 3)
    assert sorted(attention_syntax.sister_pairs(parent, 3)) == [(0, 1), (0, 2), (1, 2), (2, 1)]
    baseline = attention_syntax.sister_offset_baseline([attention_syntax.sister_pairs(parent, 3)])["sister"]
    assert baseline == {"offset": 1, "acc": 2 / 3}  # `the` and `lovely` have the next word in theirs, `film` not


def test_related_scores_on_attention_that_is_the_relation():
    """Head 0 attends only inside each token's sister constituent, head 1 only to itself."""
    parent, n = [4, 3, 3, 4, -1], 3
    g = GraphConstruction(name="complete")([5, 6, 7], [-1, 2, 0])
    src, dst = g.edges()
    pairs = set(attention_syntax.sister_pairs(parent, n))
    related = torch.tensor([(int(d), int(s)) in pairs for s, d in zip(src, dst)])
    attn = torch.zeros(g.num_edges(), 2)
    attn[:, 0] = related.float()
    attn[dst == 0, 0] = attn[dst == 0, 0] * torch.tensor([0.0, 0.7, 0.3])[src[dst == 0]]  # token 0: two sisters
    attn[:, 1] = (src == dst).float()
    r = attention_syntax.related_scores(attn, src, dst, related, g.ndata["pos"] >= 0)
    assert r["sister_n"] == 3 and r["sister"].tolist() == [3, 0]  # a clear pick in the constituent; self says nothing
    torch.testing.assert_close(r["mass"] / r["mass_n"], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(r["uniform"] / r["mass_n"], torch.tensor((2 / 3 + 1 / 3 + 1 / 3) / 3))


def test_offset_baselines():
    r = attention_syntax.offset_baselines([[-1, 0, 0], [-1, 0, 1]])
    assert r["parent"] == {"offset": -1, "acc": 0.75}  # 3 of the 4 parents sit just before
    assert r["child"] == {"offset": 1, "acc": 1.0}


@pytest.fixture(scope="module")
def trained_attention(tmp_path_factory):
    out = tmp_path_factory.mktemp("attn")
    cfg = compose_config(
        ["debug=tiny", "trainer.progress=false", "logger=none", "model=transformer", "model.num_heads=2"]
    )
    run(cfg, out)
    return out


def test_attention_syntax_command(trained_attention, tmp_path, capsys):
    assert attention_syntax.main([str(trained_attention), "--out", str(tmp_path), "--max-examples", "40"]) == 0
    r = json.loads((tmp_path / "syntax.json").read_text())
    assert len(r["parent_acc"]) == 2 and len(r["parent_acc"][0]) == 2  # layers x heads of debug=tiny
    assert all(0 <= v <= 1 for row in r["mass_on_tree"] + r["parent_acc"] + r["child_acc"] for v in row)
    assert r["examples"] == 40 and 0 < r["uniform_mass_baseline"] < 1
    for png in ("syntax_heads.png", "syntax_example.png"):
        assert (tmp_path / png).stat().st_size > 5000
    assert "best fixed offset" in capsys.readouterr().out


def test_prune_heads_command(trained_attention, tmp_path, capsys):
    assert prune_heads.main([str(trained_attention), "--out", str(tmp_path), "--no-progress"]) == 0
    r = json.loads((tmp_path / "prune.json").read_text())
    assert [s["heads_kept"] for s in r["steps"]] == [4, 3, 2, 1]
    removed = [(s["removed"]["layer"], s["removed"]["head"]) for s in r["steps"][1:]]
    assert len(set(removed)) == 3
    assert len(r["importance"]) == 4 and (tmp_path / "prune.png").is_file()
    assert "fewest heads whose validation accuracy is within 1 point" in capsys.readouterr().out
    assert [c["points"] for c in r["choices"]] == [1, 5]


def test_heads_to_keep_are_chosen_on_validation_never_on_test():
    steps = [  # test falls at 3 heads kept, validation only at 2: the choice follows validation
        {"heads_kept": 4, "val_acc": 0.80, "test_acc": 0.80},
        {"heads_kept": 3, "val_acc": 0.80, "test_acc": 0.70},
        {"heads_kept": 2, "val_acc": 0.78, "test_acc": 0.69},
        {"heads_kept": 1, "val_acc": 0.60, "test_acc": 0.75},
    ]
    one, five = prune_heads.choices(steps)
    assert (one["heads_kept"], one["test_acc"]) == (3, 0.70)  # 2 heads lose 2 val points > 1
    assert (five["heads_kept"], five["test_acc"]) == (2, 0.69)  # 1 head loses 20 > 5, whatever its test


def test_pruning_greedy_and_the_full_model_untouched(trained_attention, tmp_path):
    from tools.common import Run, accuracy

    run_ = Run.load(trained_attention)
    batches = run_.batches(run_.split("test"))
    before = accuracy(run_.model, batches)
    r = prune_heads.prune(run_, val_examples=32, method="greedy", progress=False)
    assert r["steps"][0]["test_acc"] == pytest.approx(before)
    assert all(b.aggregator.head_mask is None for b in run_.model.blocks)  # masks are cleared afterwards
    assert accuracy(run_.model, batches) == pytest.approx(before)
    assert [s["heads_kept"] for s in r["steps"]] == [4, 3, 2, 1] and r["method"] == "greedy"


def test_analysis_tools_refuse_models_without_attention(tmp_path, capsys):
    cfg = compose_config(["debug=tiny", "trainer.progress=false", "logger=none", "model=sum", "trainer.max_epochs=1"])
    run(cfg, tmp_path / "run")
    assert attention_syntax.main([str(tmp_path / "run")]) == 2
    assert "no attention" in capsys.readouterr().err
    assert prune_heads.main([str(tmp_path / "run")]) == 2
    assert "no attention heads" in capsys.readouterr().err
    assert prune_heads.main([str(tmp_path / "missing")]) == 2


# --------------------------------------------------------------------------------------------
# tools/results_table.py on sweeps whose factors are not model x graph
# --------------------------------------------------------------------------------------------
def fake_run(root: Path, name: str, overrides: list[str], acc: float, graph="complete"):
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["experiment=heads", *overrides]))
    (d / "results.json").write_text(
        json.dumps(
            {
                "model": "transformer",
                "graph": graph,
                "test_acc": acc,
                "best_val_acc": acc,
                "train_seconds": 1.0,
                "examples_per_second": 10.0,
                "epochs": 2,
                "device": "cpu",
                "test_by_depth": {"1": {"n": 3, "acc": acc}},
            }
        )
    )
    (d / "metrics.csv").write_text("epoch,train_loss,val_acc\n1,2.0,0.3\n2,1.5,0.4\n")


def test_results_table_by_length_table_and_plot(tmp_path):
    for i, (graph, acc) in enumerate([("tree", 0.5), ("complete", 0.4)]):
        fake_run(tmp_path, str(i), [f"graph={graph}"], acc, graph=graph)
        path = tmp_path / str(i) / "results.json"
        r = json.loads(path.read_text())
        r["test_by_length"] = {"1-10": {"n": 30, "acc": acc}, "11-20": {"n": 12, "acc": acc - 0.1}}
        path.write_text(json.dumps(r))
    args = [str(tmp_path), "--out", str(tmp_path / "t.md"), "--lengths", str(tmp_path / "len.png")]
    assert results_table.main(args) == 0
    text = (tmp_path / "t.md").read_text()
    assert "| graph | 1-10 (n=30) | 11-20 (n=12) |" in text
    assert "| tree | 0.500 | 0.400 |" in text and "| complete | 0.400 | 0.300 |" in text
    assert (tmp_path / "len.png").stat().st_size > 1000


def test_results_table_rows_are_the_sweep_factors(tmp_path, capsys):
    fake_run(tmp_path, "0", ["model.num_heads=8"], 0.5)
    fake_run(tmp_path, "1", ["model.num_heads=1"], 0.4)
    fake_run(tmp_path, "2", ["model.num_heads=1", "seed=1"], 0.6)
    args = [str(tmp_path), "--out", str(tmp_path / "t.md"), "--curves", str(tmp_path / "c.png")]
    assert results_table.main(args + ["--plot", str(tmp_path / "d.png")]) == 0
    text = (tmp_path / "t.md").read_text()
    assert "| model.num_heads | test accuracy |" in text
    assert text.index("| 1 | 0.500 ± 0.141 (n=2) |") < text.index("| 8 | 0.500 |")  # numeric order, seeds averaged
    assert (tmp_path / "c.png").stat().st_size > 5000 and (tmp_path / "d.png").stat().st_size > 5000


def test_results_table_graph_columns_other_factors_rows(tmp_path):
    for i, (pe, graph, acc) in enumerate([("none", "tree", 0.5), ("lap_pe", "tree", 0.6), ("none", "complete", 0.4)]):
        fake_run(tmp_path, str(i), [f"model.positional={pe}", f"graph={graph}"], acc, graph=graph)
    assert results_table.main([str(tmp_path), "--out", str(tmp_path / "t.md")]) == 0
    text = (tmp_path / "t.md").read_text()
    assert "| model.positional \\ graph | complete | tree |" in text
    assert "| none | 0.400 | 0.500 |" in text and "| lap_pe | – | 0.600 |" in text


# --------------------------------------------------------------------------------------------
# Every experiment file: composes, and every point of its sweep is a valid config
# --------------------------------------------------------------------------------------------
def _product(items: list[tuple[str, str]]) -> list[list[str]]:
    points = [[]]
    for key, values in items:
        points = [p + [f"{key}={v.strip()}"] for p in points for v in str(values).split(",")]
    return points


def sweep_points(name: str) -> list[list[str]]:
    """The override lists of an experiment's runs: its hydra.sweeper.params, or every line of its
    experiment_grids (tools/experiment.py runs them), or [[]] for a single run."""
    spec = yaml.safe_load((CONF / "experiment" / f"{name}.yaml").read_text())
    if spec.get("experiment_grids"):
        return [
            p for line in spec["experiment_grids"] for p in _product([tuple(o.split("=", 1)) for o in line.split()])
        ]
    params = (spec.get("hydra") or {}).get("sweeper", {}).get("params", {})
    return _product(list(params.items()))


def test_experiment_runner_runs_every_grid_then_the_table(tmp_path, monkeypatch):
    """tools/experiment.py: one multirun per line of experiment_grids, in order, with the extra overrides,
    then the table of the experiment's sweep directory."""
    from tools import experiment

    calls = []
    monkeypatch.setattr(experiment.subprocess, "call", lambda cmd, cwd=None: calls.append(cmd[1:]) or 0)
    assert experiment.main(["sst", "trainer.max_epochs=1"]) == 0
    grids = yaml.safe_load((CONF / "experiment" / "sst.yaml").read_text())["experiment_grids"]
    assert len(calls) == len(grids) + 1
    for call, line in zip(calls, grids):
        assert call[:3] == ["train.py", "-m", "experiment=sst"] and call[3:] == line.split() + ["trainer.max_epochs=1"]
    assert calls[-1][:3] == ["-m", "tools.results_table", "multirun/sst"]
    assert experiment.grids_of("listops_best") == [["seed=0,1,2"]]  # its 3 seeds, one grid
    calls.clear()  # an essay experiment: runs resume, scale=small goes to its own directories
    assert experiment.main(["heads", "scale=small"]) == 0
    assert calls[0][3:] == ["model.num_heads=1,2,4,8", "seed=0,1,2", "trainer.resume=auto", "scale=small"]
    assert calls[1][:3] == ["-m", "tools.results_table", "multirun/small/heads"]
    assert "--out=docs/results/small/heads.md" in calls[1]
    assert calls[2][:3] == ["-m", "tools.prune_heads", "multirun/small/heads/model.num_heads=8,seed=0"]
    calls.clear()  # an experiment_then analysis runs after the table
    assert experiment.main(["long_range", "--table-only"]) == 0
    assert calls[0][:3] == ["-m", "tools.results_table", "multirun/long_range"]
    assert calls[1][:3] == ["-m", "tools.long_range", "multirun/long_range"] and len(calls) == 2
    with pytest.raises(SystemExit, match="no experiment 'nope'; valid: .*sst"):
        experiment.grids_of("nope")


def test_experiment_files_have_a_command_header():
    for name in EXPERIMENTS:
        text = (CONF / "experiment" / f"{name}.yaml").read_text()
        assert text.startswith("# @package _global_"), name
        header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        commands = re.findall(r"experiment=(\w+)|make (\w+)|E=(\w+)", header)
        assert any(name in c for c in commands), f"{name}.yaml: its header must give the command that runs it"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_sweep_point_composes_and_passes_the_config_checks(name):
    from engine.config import check_config

    points = sweep_points(name)
    assert len(points) >= 1
    for point in points:
        cfg = compose_config([f"experiment={name}", *point])
        check_config(cfg)
        for override in point:
            key, value = override.split("=")
            if key in ("dataset",):  # a config group: compare its name
                assert cfg.dataset.name == value, (name, override)
                continue
            got = cfg[key].name if key in ("model", "graph") else OmegaConf.select(cfg, key)
            assert str(got).lower() == value.lower(), (name, override)


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_runs_a_few_steps(name, tmp_path):
    """One run per grid line of each experiment (each key at its first value), shrunk to seconds (pytest -m slow)."""
    from tests.conftest import assert_breakdowns_match_test_acc, run_script

    def check(run_dir):  # a run too short to learn: its numbers must at least agree with one another
        results = json.loads((run_dir / "results.json").read_text())
        assert_breakdowns_match_test_acc(results)
        with open(run_dir / "metrics.csv") as f:
            assert results["best_val_acc"] == max(float(r["val_acc"]) for r in csv.DictReader(f))

    tiny = ["debug=tiny", "trainer.max_epochs=1", "dataset.num_train=64", "dataset.num_val=32", "dataset.num_test=32"]
    spec = yaml.safe_load((CONF / "experiment" / f"{name}.yaml").read_text())
    if spec.get("experiment_grids"):  # one run per grid line (its first value of every key)
        data_dir = (spec.get("dataset") or {}).get("data_dir")
        if data_dir and not (CONF.parent / data_dir).is_dir():
            pytest.skip(f"experiment={name} reads {data_dir}, which is not beside this checkout")
        if "override /dataset" in str(spec.get("defaults")) and "listops_long" in str(spec.get("defaults")):
            tiny.append("dataset.min_length=20")  # debug=tiny caps lengths at 40
        for k, line in enumerate(spec["experiment_grids"]):
            first = [o.split(",")[0] for o in line.split()]
            run_script("train.py", f"experiment={name}", *first, *tiny, f"hydra.run.dir={tmp_path}/{k}", timeout=900)
            check(tmp_path / str(k))
        return
    points = sweep_points(name)
    if points == [[]]:
        run_script("train.py", f"experiment={name}", *tiny, f"hydra.run.dir={tmp_path}/run")
        results = [tmp_path / "run" / "results.json"]
    else:
        run_script("train.py", "-m", f"experiment={name}", *tiny, f"hydra.sweep.dir={tmp_path}/sweep", timeout=900)
        results = sorted((tmp_path / "sweep").glob("*/results.json"))
    assert len(results) == len(points)
    for path in results:
        check(path.parent)
