"""studies/graph_probe and the gold-tree lifting of data/wordpiece.py: the probe, the cosine table,
the tree on pieces, SST's own tokens for dep, and one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from data.wordpiece import Pieces, piece_graph
from studies import graph_probe as gp

CLS, SEP, MASK = 101, 102, 103


def edges(g) -> set[tuple[int, int]]:
    s, d = g.edges()
    return set(zip(s.tolist(), d.tolist()))


# ---- the probe --------------------------------------------------------------------------------
def toy(n: int, seed: int):
    """Separable 2-class data, 70% class 1: class = sign of feature 0 (margin 1), 4 noise features."""
    gen = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=gen) < 0.7).long()
    x = torch.randn(n, 5, generator=gen)
    x[:, 0] = (2 * y - 1) * (1.0 + torch.rand(n, generator=gen))
    return x.numpy(), y.numpy()


def test_probe_learns_a_separable_problem_and_chooses_its_l2_on_dev_not_test():
    train, test = toy(300, 0), toy(200, 1)
    # dev: the test inputs with every label flipped, so dev accuracy = 1 - test accuracy for every
    # setting: the dev-best L2 is the test-worst one
    dev = (test[0], 1 - test[1])
    out = gp.probe(train, dev, test, grid=(1e-4, 100.0))
    by_l2 = {r["l2"]: r for r in out["grid"]}
    assert by_l2[1e-4]["train"] == 1.0 and by_l2[1e-4]["test"] == 1.0  # learns the separable problem
    # L2 = 100 shrinks the weights to ~0: the bias alone predicts the majority class everywhere
    assert by_l2[100.0]["test"] == pytest.approx(test[1].mean())
    assert out["l2"] == 100.0  # dev's choice ...
    assert out["dev_acc"] == by_l2[100.0]["dev"] > by_l2[1e-4]["dev"]
    assert out["test_acc"] == by_l2[100.0]["test"] < 1.0  # ... and its test accuracy, not the best test one
    p = out["test_acc"]
    assert out["test_noise"] == pytest.approx(2 * np.sqrt(p * (1 - p) / 200))
    assert out["test_correct"] == by_l2_correct(out, test)


def by_l2_correct(out, test):
    """The reported per-sentence outcomes are those of the chosen probe: as many right as its test accuracy."""
    assert sum(out["test_correct"]) == round(out["test_acc"] * len(test[1]))
    return out["test_correct"]


# ---- the verdicts: tools.stats.compare, deterministic cells paired per sentence ------------------
def a_probe(correct) -> dict:
    return {"test_acc": float(np.mean(correct)), "test_correct": list(correct)}


def test_versus_complete_is_compare_of_two_deterministic_cells_paired_per_sentence():
    from tools.stats import Cell, compare

    a, b = [1, 1, 0, 1], [1, 0, 0, 0]
    v = gp.versus_complete(a_probe(a), a_probe(b), "toy")
    cells = [Cell([np.mean(c)], correct=c, fingerprint="toy: test", deterministic=True) for c in (a, b)]
    assert v == compare(*cells).as_dict()
    # by hand: per-sentence difference [0, 1, 0, 1], mean 0.5, variance (ddof 1) 1/3, no seed term (deterministic),
    # t(0.975, 3 df) = 3.182: noise 3.182 * sqrt(1/3 / 4) = 0.919, so 0.5 is no finding on 4 sentences
    assert v["rule"] == "paired" and v["diff"] == 0.5 and v["df"] == 3
    assert v["noise"] == pytest.approx(3.1824 * np.sqrt(1 / 3 / 4), rel=1e-4)
    assert v["verdict"] == "no difference measurable here"
    same = gp.versus_complete(a_probe([1, 0, 1]), a_probe([1, 0, 1]), "toy")
    assert same["diff"] == 0.0 and same["noise"] == 0.0  # the same outcomes: no difference, no noise


def test_pairing_sees_a_difference_the_binomial_rule_cannot():
    # 1,000 sentences: b right on 800, a on the same 800 and 40 more. The unpaired binomial term (each
    # accuracy's own) puts the threshold near 3.4 points; pairing sees that the two disagree on 40 sentences only.
    from tools.stats import Cell, compare

    b = np.r_[np.ones(800), np.zeros(200)]
    a = b.copy()
    a[800:840] = 1
    v = gp.versus_complete(a_probe(a), a_probe(b), "toy")
    unpaired = compare(Cell([a.mean()], n=1000, deterministic=True), Cell([b.mean()], n=1000, deterministic=True))
    assert v["rule"] == "paired" and unpaired.rule == "unpaired"
    assert v["noise"] < 0.5 * unpaired.noise < unpaired.noise < 0.04 < v["diff"] + 0.001
    assert v["verdict"] == "A higher" and unpaired.verdict == "A higher"
    a[800:830] = 0  # 10 more right only: 1 point, a finding paired (noise ~0.6) and not unpaired (~3.4)
    v = gp.versus_complete(a_probe(a), a_probe(b), "toy")
    assert v["verdict"] == "A higher" and v["noise"] < 0.01
    unpaired = compare(Cell([a.mean()], n=1000, deterministic=True), Cell([b.mean()], n=1000, deterministic=True))
    assert unpaired.verdict == "no difference measurable here"


def results_for(tmp_path):
    """A results dict of two graphs on 50 sentences, as run_dataset writes it (no model)."""
    rng = np.random.default_rng(0)
    comp = (rng.random(50) < 0.8).astype(int)
    other = comp.copy()
    other[:12] = 0
    graphs = {}
    for g, c in (("complete", comp), ("none", other)):
        probe = {"l2": 0.1, "dev_acc": 0.8, "test_acc": float(c.mean()), "test_noise": gp.noise(c.mean(), 50)}
        probe["test_correct"] = c.tolist()
        cos = {k: 1.0 for k in ("mean", "p1", "p5", "p25", "p50", "min")}
        graphs[g] = {"cosine_to_complete": cos, "probe": probe, "embed_s": 1.0, "cached": False}
    return {"toy": {"sizes": {"train": 1, "dev": 1, "test": 50}, "graphs": graphs, "command": "c", "wall_s": 6.0}}


def test_each_row_of_the_table_is_the_rules_verdict_on_its_cells(tmp_path):
    results = results_for(tmp_path)
    path = tmp_path / "t.md"
    gp.write_markdown(results, path)
    text = path.read_text()
    v = gp.versus_complete(*(results["toy"]["graphs"][g]["probe"] for g in ("none", "complete")), "toy")
    row = next(line for line in text.splitlines() if line.startswith("| none |")).split(" | ")
    header = next(line for line in text.splitlines() if line.startswith("| graph |")).split(" | ")
    cell = dict(zip(header, row))
    assert cell["test − complete"] == f"{100 * v['diff']:+.2f}" and cell["noise"] == f"{100 * v['noise']:.2f}"
    assert cell["verdict"] == gp.VERDICT_WORDS.get(v["verdict"], v["verdict"]) and cell["rule"] == "paired"
    assert "[docs/statistics.md](../statistics.md)" in text  # the one page that states the rule
    # the stored verdict is not trusted: a stale one in the JSON changes nothing in the table
    results["toy"]["graphs"]["none"]["probe"]["vs_complete"] = {"diff": 0.5, "noise": 9.0, "verdict": "A higher"}
    gp.write_markdown(results, path)
    assert path.read_text() == text


def test_rejudge_rewrites_the_json_and_the_table_from_per_sentence_outcomes(tmp_path):
    import json

    out = tmp_path / "frozen"
    results = results_for(tmp_path)
    results["toy"]["graphs"]["none"]["probe"].update(vs_complete=-0.24, vs_complete_noise=0.1)  # the rule before
    gp.write_record(out, {"l2_grid": list(gp.L2_GRID), "results": results})
    assert gp.main(["--rejudge", "--out", str(out)]) == 0
    probe = json.loads(out.with_suffix(".json").read_text())["results"]["toy"]["graphs"]["none"]["probe"]
    assert "vs_complete_noise" not in probe
    assert probe["vs_complete"] == gp.versus_complete(probe, results["toy"]["graphs"]["complete"]["probe"], "toy")
    assert "| none |" in out.with_suffix(".md").read_text()


# ---- the cosine table -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm():
    from models.minilm import build_minilm, load_wordpiece

    return build_minilm({"normalize": True}, None).eval(), load_wordpiece()


def test_cosine_table_complete_is_one_and_none_moves_every_sentence(minilm):
    model, wordpiece = minilm
    split = gp.Split(
        [
            s.split()
            for s in (
                "The ferry left the harbour at dawn .",
                "Nobody expected the sequel to be this dull .",
                "Rain again , and the umbrellas are all broken .",
            )
        ],
        [0, 1, 0],
    )
    emb = {
        g: gp.embed_graphs(gp.build_graphs(split, g, wordpiece), model, progress=False) for g in ("complete", "none")
    }
    model.impl = "sparse"  # the complete graph again, the other implementation: the same embedding
    emb["complete_sparse"] = gp.embed_graphs(gp.build_graphs(split, "complete", wordpiece), model, progress=False)
    model.impl = "dense"
    table = gp.cosine_table(emb)
    assert table["complete"]["mean"] == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(table["complete_sparse"]["values"], 1.0, atol=1e-6)
    cos = table["none"]["values"]
    assert cos.shape == (3,) and np.all(cos < 0.99) and np.all(cos > 0.0)
    ref = emb["complete"] / np.linalg.norm(emb["complete"], axis=1, keepdims=True)
    x = emb["none"] / np.linalg.norm(emb["none"], axis=1, keepdims=True)
    np.testing.assert_allclose(cos, (ref * x).sum(1), atol=1e-6)
    assert table["none"]["mean"] == pytest.approx(float(cos.mean())) and table["none"]["min"] == pytest.approx(
        cos.min()
    )


# ---- the gold tree on pieces ------------------------------------------------------------------
def test_gold_tree_lifted_to_pieces_by_hand():
    # words w0 w1 w2, w0 cut into two pieces; tree ((w0 w1) w2): phrase 3 = (w0 w1), phrase 4 = root
    pieces = Pieces([CLS, 11, 12, 13, 14, SEP], [-1, 0, 0, 1, 2, -1], 3)
    g = piece_graph(pieces, "tree", parent=[3, 3, 4, 4, -1], mask_id=MASK)
    # nodes: 0 [CLS], 1-2 w0's pieces, 3 w1, 4 w2, 5 [SEP], 6 phrase (w0 w1), 7 root
    special = (
        {(0, v) for v in range(8)}
        | {(v, 0) for v in range(8)}
        | {(5, v) for v in range(8)}
        | {(v, 5) for v in range(8)}
    )
    same_word = {(1, 1), (1, 2), (2, 1), (2, 2), (3, 3), (4, 4), (6, 6), (7, 7)}
    tree = {(1, 6), (6, 1), (2, 6), (6, 2), (3, 6), (6, 3), (6, 7), (7, 6), (4, 7), (7, 4)}
    assert edges(g) == special | same_word | tree
    assert g.ndata["tok"].tolist() == [CLS, 11, 12, 13, 14, SEP, MASK, MASK]
    assert g.ndata["pos"].tolist() == [0, 1, 2, 3, 4, 5, 1, 1]  # a phrase sits at its first piece
    assert g.ndata["pool"].tolist() == [1, 1, 1, 1, 1, 1, 0, 0]  # phrases are not pooled


def test_gold_tree_truncated_keeps_the_phrases_over_kept_words():
    # only w0's two pieces survive truncation: phrase (w0 w1) and the root keep w0; w1, w2 are gone
    pieces = Pieces([CLS, 11, 12, SEP], [-1, 0, 0, -1], 3, truncated=2)
    g = piece_graph(pieces, "tree", parent=[3, 3, 4, 4, -1], mask_id=MASK)
    assert g.num_nodes() == 6
    inner = {(u, v) for u, v in edges(g) if u not in (0, 3) and v not in (0, 3)}
    assert inner == {(1, 1), (1, 2), (2, 1), (2, 2), (4, 4), (5, 5), (1, 4), (4, 1), (2, 4), (4, 2), (4, 5), (5, 4)}


def test_bad_gold_tree_is_one_line():
    pieces = Pieces([CLS, 11, 13, SEP], [-1, 0, 1, -1], 2)
    with pytest.raises(ValueError, match=r"parent\[2\] = 1: a node's parent must be a later phrase node"):
        piece_graph(pieces, "tree", parent=[2, 2, 1], mask_id=MASK)


SST_LINES = {
    "train.txt": "(3 (2 -LRB-) (3 (3 (2 good) (2 fun)) (2 -RRB-)))\n(0 (0 awful) (2 .))\n",
    "dev.txt": "(4 (4 superb) (2 .))\n(2 (2 neutral) (2 .))\n",
    "test.txt": "(1 (2 The) (1 (1 plot) (2 sags)))\n",
}


def test_sst_words_unescaped_with_gold_tree_and_dep_on_its_own_tokens(tmp_path, monkeypatch, minilm):
    _, wordpiece = minilm
    for name, text in SST_LINES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(gp, "CACHE", tmp_path / "cache")
    splits = gp.load_sst_binary(tmp_path)
    train = splits["train"]
    assert train.words[0] == ["(", "good", "fun", ")"] and train.labels == [1, 0]
    assert splits["dev"].labels == [1]  # the neutral root is dropped (binary SST)
    assert train.parents[0] == [6, 4, 4, 5, 5, 6, -1]  # the gold tree: (good fun), then + ")", then the root
    gp.add_heads("sst_binary", splits)
    assert [len(h) for h in train.heads] == [4, 2]  # spaCy parsed the treebank's words, not its own split
    assert all(sum(x == -1 for x in h) >= 1 for h in train.heads)
    tree = gp.build_graphs(train, "tree", wordpiece)[0]
    n_pieces = len(wordpiece.pieces(train.words[0]))
    assert tree.num_nodes() == n_pieces + 3  # three phrases of the gold tree as extra nodes
    dep = gp.build_graphs(train, "dep", wordpiece)[0]
    assert dep.num_nodes() == n_pieces  # no extra nodes
    assert list(gp.CACHE.glob("heads_sst_binary_*.json"))  # the parse is cached


# ---- bad input ----------------------------------------------------------------------------------
def test_unknown_graph_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r"
    code = gp.main(["--graphs", "complete,tre", "--out", str(out), "--figure", str(tmp_path / "f.png")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == "error: unknown graph 'tre'; valid: complete, tree, dep, window, bpt, none (comma-separated)"
    assert not list(tmp_path.iterdir())
    assert gp.main(["--datasets", "sst5", "--out", str(out)]) == 2
    assert "unknown dataset 'sst5'" in capsys.readouterr().err
