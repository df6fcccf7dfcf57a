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


def test_paired_difference_by_hand():
    # a right on 3 of 4, b on 1 of 4, per-sentence difference [0, 1, 0, 1]: mean 0.5, variance 0.25
    diff, noise = gp.paired_difference([1, 1, 0, 1], [1, 0, 0, 0])
    assert diff == 0.5 and noise == pytest.approx(2 * np.sqrt(0.25 / 4))
    assert gp.paired_difference([1, 0, 1], [1, 0, 1]) == (0.0, 0.0)  # the same outcomes: no difference, no noise


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
