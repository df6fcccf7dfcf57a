"""Soft syntax in the pretrained MiniLM (issue 33): the tree-distance buckets the data side puts on every edge
(data/wordpiece.py), the learned attention bias over them and the late-fusion blocks (models/minilm.py).
HF's BertModel is the reference for step 0, loaded offline from the installed package."""

from __future__ import annotations

import dataclasses
import logging

import dgl
import pytest
import torch
import torch.nn.functional as F

import models
from data.vocab import Vocab
from data.wordpiece import SPECIAL, UNCONNECTED, PieceConstruction, piece_graph, word_distances
from models.minilm import model_dir
from tests.conftest import compose_config

# two parsed sentences (heads by hand, -1 at the root); "unwatchable" is several pieces
SENTENCES = [
    (["The", "weather", "is", "lovely", "today", "."], [1, 2, -1, 2, 2, 2]),
    (["An", "unwatchable", ",", "dreadful", "film"], [4, 4, 4, 4, -1]),
]


def construction_and_model(*overrides: str, num_classes: int = 3):
    cfg = compose_config(["model=minilm", "graph=complete", *overrides])
    construction = models.make_construction(cfg.graph, Vocab.build([["x"]]), cfg.model)
    model = models.build_model(cfg.model, 1, num_classes, construction)
    return construction, model


def batch(construction, sentences=SENTENCES):
    return dgl.batch([construction(words, heads) for words, heads in sentences])


@pytest.fixture(scope="module")
def hf():
    from transformers import BertModel, BertTokenizerFast

    folder = str(model_dir())
    model = BertModel.from_pretrained(folder, local_files_only=True, attn_implementation="eager").eval()
    return model, BertTokenizerFast.from_pretrained(folder, local_files_only=True)


# ---- the data side: distance buckets on the edges -----------------------------------------------------------
def test_word_distances_by_hand():
    # dependency: 0 <- 1 <- 2 (root), 3 -> 2, 4 a second root (a parse split in two)
    d = word_distances(5, heads=[1, 2, -1, 2, -1])
    assert d[0].tolist() == [0, 1, 2, 3, -1]
    assert d[3, 1].item() == 2 and d[4, 4].item() == 0 and d[2, 4].item() == -1
    # constituency ((w0 w1) w2): phrases 3 = (w0 w1), 4 = root; sisters are 2 apart through their phrase
    d = word_distances(3, parent=[3, 3, 4, 4, -1])
    assert d.tolist() == [[0, 2, 3], [2, 0, 3], [3, 3, 0]]


def test_edges_carry_the_bucket_of_their_words_distance():
    construction, _ = construction_and_model("model.structure_bias=dep")
    words = ["An", "unwatchable", ",", "dreadful", "film", "yesterday", "today", "here", "now"]
    heads = [4, 4, 4, 4, -1, 4, 5, 6, 7]  # a chain film <- yesterday <- today <- here <- now
    g = construction(words, heads)
    pieces = construction.wordpiece.pieces(words)
    assert g.num_edges() == len(pieces) ** 2  # still the complete graph
    src, dst = g.edges()
    bucket = {(s, t): b for s, t, b in zip(src.tolist(), dst.tolist(), g.edata["dist"].tolist())}
    first = {w: pieces.word.index(w) for w in range(len(words))}
    unwatchable = [k for k, w in enumerate(pieces.word) if w == 1]
    assert len(unwatchable) > 1 and bucket[(unwatchable[0], unwatchable[-1])] == 0  # one word: distance 0
    assert bucket[(first[0], first[4])] == 1 and bucket[(first[0], first[3])] == 2  # head; sister via head
    assert bucket[(first[0], first[6])] == 3 and bucket[(first[0], first[7])] == 4  # 4 hops: "4 or more"
    assert bucket[(first[0], first[8])] == 4 and bucket[(first[8], first[1])] == 4  # 5 hops: "4 or more" too
    cls, sep = 0, len(pieces) - 1
    assert bucket[(cls, first[2])] == SPECIAL and bucket[(first[2], sep)] == SPECIAL and bucket[(cls, sep)] == SPECIAL
    g2 = construction(["a", "b"], [-1, -1])  # two roots: no path
    pairs = dict(zip(zip(*(e.tolist() for e in g2.edges())), g2.edata["dist"].tolist()))
    assert pairs[(1, 2)] == UNCONNECTED


def test_distances_are_in_the_construction_and_the_cache_key():
    none, _ = construction_and_model()
    dep, _ = construction_and_model("model.structure_bias=dep")
    fusion, _ = construction_and_model("model.syntax_layers=1")
    assert (none.distances, dep.distances, fusion.distances) == ("none", "dep", "dep")
    assert dataclasses.asdict(none) != dataclasses.asdict(dep)  # the graph cache (data.graph_cache) keys on asdict
    assert "dist" not in none(*SENTENCES[0]).edata  # off: the graphs are the ones they were


def test_tree_without_a_gold_tree_uses_the_dependency_parse_and_says_so_once(caplog):
    tree, _ = construction_and_model("model.structure_bias=tree")
    dep, _ = construction_and_model("model.structure_bias=dep")
    with caplog.at_level(logging.INFO, logger="data.wordpiece"):
        graphs = [tree(words, heads, None) for words, heads in SENTENCES]
    said = [r.getMessage() for r in caplog.records if "no gold tree" in r.getMessage()]
    assert len(said) == 1 and "dependency parse" in said[0], said
    for g, (words, heads) in zip(graphs, SENTENCES):
        assert torch.equal(g.edata["dist"], dep(words, heads).edata["dist"])


def test_tree_reads_the_gold_tree_when_there_is_one():
    tree, _ = construction_and_model("model.structure_bias=tree")
    words, heads = ["the", "film", "was", "awful"], [1, 2, -1, 2]
    parent = [4, 4, 5, 5, 6, 6, -1]  # ((the film) (was awful)): 4 = NP, 5 = VP, 6 = S
    g = tree(words, heads, (parent, [0] * len(parent)))
    pieces = tree.wordpiece.pieces(words)
    assert g.num_nodes() == len(pieces)  # graph=complete: no phrase nodes, only their distances
    pairs = dict(zip(zip(*(e.tolist() for e in g.edges())), g.edata["dist"].tolist()))
    the, film, was, awful = (pieces.word.index(w) for w in range(4))
    assert pairs[(the, film)] == 2 and pairs[(was, awful)] == 2 and pairs[(the, was)] == 4
    assert pairs[(film, was)] == 4  # the dependency parse would say 1


def test_fusion_graph_is_the_lifted_dependency_graph():
    construction, model = construction_and_model("model.syntax_layers=1")
    g = batch(construction)
    syntax = model.syntax_graph(g)
    ours = set(zip(*(e.tolist() for e in syntax.edges())))
    wordpiece = construction.wordpiece
    dep = dgl.batch([piece_graph(wordpiece.pieces(w), "dep", h, mask_id=wordpiece.mask_id) for w, h in SENTENCES])
    assert ours == set(zip(*(e.tolist() for e in dep.edges()))) and syntax.num_nodes() == g.num_nodes()


# ---- the model: step 0 is BERT, sparse equals dense, gradients reach the bias -------------------------------
@pytest.mark.parametrize("impl", ["sparse", "dense"])
@pytest.mark.parametrize(
    "extra", [["model.structure_bias=dep", "model.syntax_layers=1"], ["model.structure_bias=tree"]]
)
def test_step_zero_equals_hf_bert(hf, impl, extra):
    """A zero bias and identity fusion blocks: the node states are HF BertModel's within 1e-4."""
    construction, model = construction_and_model(f"model.impl={impl}", *extra)
    model.eval()
    g = batch(construction)
    bert, tokenizer = hf
    words = [w for w, _ in SENTENCES]
    enc = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
    assert g.ndata["tok"].tolist() == enc["input_ids"][enc["attention_mask"].bool()].tolist()
    with torch.no_grad():
        ours = model.node_states(g)
        theirs = bert(**enc).last_hidden_state[enc["attention_mask"].bool()]
    diff = (ours - theirs).abs().max().item()
    assert diff <= 1e-4, f"max |diff| {diff:.2e}"


def perturbed(*overrides: str):
    """A model whose bias and fusion blocks are not at their zero start: every new parameter random."""
    construction, model = construction_and_model(*overrides)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "structure_bias" or name.startswith("fusion."):
                p.copy_(torch.randn_like(p) * (1.0 if name == "structure_bias" else 0.05))
    return construction, model.eval()


@pytest.mark.parametrize(
    "extra",
    [
        ["model.structure_bias=dep"],
        ["model.structure_bias=dep", "model.syntax_layers=2"],
        ["model.syntax_layers=1", "model.syntax_aggregator=gat"],
        ["model.structure_bias=dep", "graph=dep"],  # a sparse graph: the bias on its edges only
    ],
)
def test_sparse_equals_dense_with_a_nonzero_bias(extra):
    construction, model = perturbed(*extra)
    g = batch(construction)
    with torch.no_grad():
        sparse, dense = model.node_states(g, "sparse"), model.node_states(g, "dense")
        model.structure_bias is not None and model.structure_bias.zero_()
        for block in model.fusion:
            block.aggregator.out.weight.zero_()
            block.aggregator.out.bias.zero_()
            block.ffn[-1].weight.zero_()
            block.ffn[-1].bias.zero_()
        baseline = model.node_states(g, "sparse")
    diff = (sparse - dense).abs().max().item()
    assert diff <= 1e-4, f"max |diff| {diff:.2e}"
    assert (sparse - baseline).abs().max().item() > 1e-2  # the bias and the blocks do change the states


def test_bias_changes_attention_by_its_bucket():
    """A large bias on distance 1 only: every head of layer 0 puts more weight on head/dependent pairs."""
    construction, model = construction_and_model("model.structure_bias=dep")
    model.eval()
    g = batch(construction)
    with torch.no_grad():
        _, before, _ = model.trace(g)
        model.structure_bias[0, 1] = 5.0
        _, after, _ = model.trace(g)
    near = g.edata["dist"] == 1
    assert (after[0][near].mean(0) > before[0][near].mean(0)).all()
    assert torch.allclose(after[1], after[1]) and not torch.allclose(after[0], before[0])


@pytest.mark.parametrize("impl", ["sparse", "dense"])
def test_gradients_reach_the_bias_and_the_fusion_blocks(impl):
    construction, model = construction_and_model(
        f"model.impl={impl}", "model.structure_bias=dep", "model.syntax_layers=1"
    )
    g = batch(construction)
    loss = F.cross_entropy(model(g), torch.tensor([0, 2]))
    loss.backward()
    grad = model.structure_bias.grad  # (L, T, H)
    present = torch.unique(g.edata["dist"])
    assert grad[:, present].abs().sum(-1).gt(0).all()  # every layer, every bucket the batch has
    absent = [t for t in range(grad.shape[1]) if t not in present.tolist()]
    assert grad[:, absent].abs().sum() == 0
    fusion = model.fusion[0]
    assert fusion.aggregator.out.weight.grad.abs().sum() > 0 and fusion.ffn[-1].weight.grad.abs().sum() > 0


def test_param_groups_scale_the_bias_only():
    _, plain = construction_and_model()
    assert not isinstance(plain.param_groups(3e-5), list)  # no soft syntax: parameters() as before
    _, model = construction_and_model(
        "model.structure_bias=dep", "model.syntax_layers=1", "model.structure_bias_lr_scale=100"
    )
    groups = model.param_groups(3e-5)
    assert "lr" not in groups[0] and groups[1]["lr"] == pytest.approx(3e-3)
    new = {id(p) for p in groups[1]["params"]}
    assert new == {id(model.structure_bias)}  # the fusion blocks learn at optim.lr, as the classifier
    assert sum(p.numel() for g in groups for p in g["params"]) == sum(p.numel() for p in model.parameters())
    assert not any(id(p) in new for p in model.blocks.parameters())


def test_soft_syntax_fine_tunes_a_toy_task():
    """A few AdamW steps on four sentences: the loss falls, the bias leaves zero; logits are (B, C)."""
    construction, model = construction_and_model(
        "model.structure_bias=dep", "model.syntax_layers=1", "model.structure_bias_lr_scale=100", num_classes=2
    )
    torch.manual_seed(0)
    data = [*SENTENCES, (["A", "lovely", "film"], [2, 2, -1]), (["Dreadful", "weather"], [1, -1])]
    g, y = batch(construction, data), torch.tensor([1, 0, 1, 0])
    opt = torch.optim.AdamW(model.param_groups(1e-4), lr=1e-4)
    model.train()
    losses = []
    for _ in range(8):
        logits = model(g)
        assert logits.shape == (4, 2)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
    assert model.structure_bias.abs().max() > 1e-3


def test_bad_options_are_one_line():
    for extra, says in (
        (["model.structure_bias=heads"], "unknown model.structure_bias 'heads'"),
        (["model.syntax_aggregator=gcn"], "unknown model.syntax_aggregator 'gcn'"),
        (["model.structure_bias=tree", "model.syntax_layers=1"], "use model.structure_bias=dep"),
        (["model.syntax_layers=-1"], "model.syntax_layers must be 0 or more"),
    ):
        with pytest.raises(ValueError) as e:
            construction_and_model(*extra)
        assert says in str(e.value) and "\n" not in str(e.value)
    _, model = construction_and_model("model.structure_bias=dep")
    plain, _ = construction_and_model()
    with pytest.raises(ValueError, match="edata 'dist'"):
        model(batch(plain))


def test_a_config_without_the_new_keys_is_a_run_without_them():
    """Checkpoints written before issue 33 have no soft-syntax keys: they load as runs without them."""
    from models.minilm import MiniLMConfig

    cfg = compose_config(["model=minilm"]).model
    old = {k: cfg[k] for k in ("name", "readout", "impl", "dropout", "attn_dropout", "max_pieces")}
    config = MiniLMConfig.from_mapping(old)
    assert (config.structure_bias, config.syntax_layers, config.distances()) == ("none", 0, "none")
    from engine.checkpoint import upgrade_config

    upgraded = upgrade_config({"model": old})["model"]  # the path an old checkpoint takes (evaluate.py)
    assert MiniLMConfig.from_mapping(upgraded) == config


def test_unknown_distance_tree_is_refused():
    with pytest.raises(ValueError, match="valid: none, tree, dep"):
        PieceConstruction("complete", str(model_dir() / "tokenizer.json"), distances="gold")


@pytest.mark.slow
def test_train_py_runs_soft_syntax_and_its_checkpoint_evaluates_the_same(tmp_path):
    """train.py with the dep bias and a fusion block, one epoch on a toy treebank; evaluate.py rebuilds the model
    from the checkpoint (the soft-syntax keys and the distance buckets included) and scores the same test accuracy."""
    import json

    from tests.conftest import rescored_test_acc
    from tests.models.test_minilm_training import overrides, train

    folder = tmp_path / "toy"
    folder.mkdir()
    for name, n in (("train.txt", 32), ("dev.txt", 8), ("test.txt", 8)):
        lines = [
            f"({4 if i % 2 == 0 else 0} (2 (2 the) (2 film)) ({4 if i % 2 == 0 else 0} (2 was) "
            f"({4 if i % 2 == 0 else 0} {'great' if i % 2 == 0 else 'awful'})))"
            for i in range(n)
        ]
        (folder / name).write_text("\n".join(lines) + "\n")
    run = tmp_path / "run"
    args = overrides(folder, tmp_path, "graph=complete", "trainer.max_epochs=1", "model.structure_bias=dep")
    args += ["model.syntax_layers=1", "model.structure_bias_lr_scale=100", f"hydra.run.dir={run}"]
    res = train(args)
    assert res.returncode == 0, res.stderr[-2000:]
    results = json.loads((run / "results.json").read_text())
    ckpt = torch.load(run / "checkpoints" / "best.pt", weights_only=True)
    assert ckpt["model"]["structure_bias"].abs().max() > 0  # the bias learned (it starts at zero)
    assert ckpt["config"]["model"]["syntax_layers"] == 1
    assert rescored_test_acc(run, tmp_path / "eval") == results["test_acc"]
