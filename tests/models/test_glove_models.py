"""model.embeddings=glove wired into every model with an embedding table (models/embeddings.py): coverage
through a model build, the vector of "the", frozen rows through a real training run, results.json, a
checkpoint round trip, old checkpoints, and a missing package."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from data import glove as G
from data.vocab import SPECIALS, Vocab
from engine.checkpoint import load_checkpoint, load_model, upgrade_config
from models import build_model
from tests.conftest import compose_config, rescored_test_acc
from tests.data.test_real_sentences import write_treebank
from train import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "old_checkpoints"

# Hand-made sentences: 14 word types, 12 of them GloVe words ("zqxvbnmq" and "glorptastic" are not);
# 15 running words, 13 of them GloVe's ("good" twice). "The" is looked up as "the".
SENTENCES = [
    ["(", "good", ")", "fun", "."],
    ["it", "is", "here"],
    ["good"],
    ["a", "bad", "awful", "film"],
    ["zqxvbnmq", "glorptastic"],
]
COVERAGE = {"types": 14, "types_found": 12, "tokens": 15, "tokens_found": 13}
# The same words as treebank lines (the SST reader lower-cases them), for real training runs.
TREES = [
    "(4 (3 (2 -LRB-) (3 (3 Good) (2 -RRB-))) (4 (4 fun) (2 .)))",
    "(2 (2 It) (2 (2 is) (2 here)))",
    "(3 Good)",
    "(0 (1 (2 A) (1 bad)) (0 (0 awful) (2 film)))",
    "(1 (2 zqxvbnmq) (1 glorptastic))",
]


def glove_row(word):
    """The word's row of the installed vectors file, read straight from the file."""
    glove = G.load_glove()
    return torch.from_numpy(np.array(np.load(glove.root / G.VECTORS_FILE, mmap_mode="r")[glove.index[word]]))


def model_cfg(model, *extra):
    return compose_config([f"model={model}", "model.embeddings=glove", *extra]).model


@pytest.mark.parametrize("model", ["treelstm", "recursive", "transformer", "gcn"])
def test_coverage_of_a_hand_made_vocabulary_through_a_model_build(model):
    vocab = Vocab.build(SENTENCES)
    built = build_model(model_cfg(model, "model.hidden_dim=32"), vocab, 5)
    cov = built.embed.coverage
    assert {k: cov[k] for k in COVERAGE} == COVERAGE
    assert cov["type_coverage"] == 12 / 14 and cov["token_coverage"] == 13 / 15
    assert (cov["kind"], cov["freeze"]) == ("glove", True)
    assert built.embed.found.tolist() == [False] * len(SPECIALS) + [
        w not in ("zqxvbnmq", "glorptastic") for w in vocab.itos[len(SPECIALS) :]
    ]
    ids = torch.tensor([vocab.stoi["good"], vocab.stoi["glorptastic"]])
    assert built.embed(ids).shape == (2, 32)  # projected 50 -> hidden_dim


@pytest.mark.parametrize("model,extra", [("treelstm", []), ("transformer", ["model.num_heads=5"])])
def test_the_is_row_zero_of_the_file_in_a_built_model(model, extra):
    vocab = Vocab(list(SPECIALS) + ["movie", "The", "the"])
    built = build_model(model_cfg(model, "model.hidden_dim=50", *extra), vocab, 2)
    table = built.embed.table()  # before the projection
    row0 = torch.from_numpy(np.array(np.load(G.package_root() / G.VECTORS_FILE, mmap_mode="r")[0]))
    assert torch.equal(table[vocab.stoi["the"]], row0) and torch.equal(table[vocab.stoi["The"]], row0)
    assert torch.equal(table[vocab.stoi["the"], :5], torch.tensor([0.418, 0.24968, -0.41242, 0.1217, 0.34527]))
    assert isinstance(built.embed.proj, nn.Identity)  # hidden_dim = 50: no projection
    assert isinstance(build_model(model_cfg(model), vocab, 2).embed.proj, nn.Linear)  # hidden_dim != 50


def test_learned_stays_the_default_and_needs_no_vocabulary():
    cfg = compose_config(["model=treelstm"]).model
    assert cfg.embeddings == "learned"
    assert isinstance(build_model(cfg, 30, 2).embed, nn.Embedding)
    with pytest.raises(ValueError, match="needs the vocabulary's tokens"):
        build_model(model_cfg("treelstm"), 30, 2)
    with pytest.raises(ValueError, match="unknown model.embeddings 'word2vec'; valid: learned, glove"):
        build_model(compose_config(["model=gat", "model.embeddings=word2vec"]).model, 30, 2)


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    root = tmp_path_factory.mktemp("glove-treebank")
    return {"dir": write_treebank(root / "trees", TREES, TREES, TREES), "cache": root / "cache"}


def glove_run(treebank, out, *extra):
    overrides = [
        "dataset=sst",
        f"dataset.data_dir={treebank['dir']}",
        f"dataset.cache_dir={treebank['cache']}",
        "dataset.min_freq=1",
        "model.embeddings=glove",
        "model.hidden_dim=16",
        "model.dropout=0.0",
        "trainer.max_epochs=3",
        "trainer.batch_size=2",
        "trainer.progress=false",
        "logger=none",
        "optim.lr=1e-2",
        "optim.warmup_ratio=0.0",
        *extra,
    ]
    return run(compose_config(overrides), out)


@pytest.mark.parametrize("model,graph", [("treelstm", "tree"), ("transformer", "complete")])
def test_frozen_rows_stay_and_results_carry_coverage_and_evaluate_agrees(treebank, tmp_path, model, graph):
    glove_run(treebank, tmp_path, f"model={model}", f"graph={graph}")
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    vocab, state = ckpt["vocab"], ckpt["model"]
    for word in ("good", "fun", "film", "."):  # unchanged by 3 epochs of AdamW (weight decay included)
        assert torch.equal(full_table(state)[vocab.index(word)], glove_row(word)), word
    losses = [float(r.split(",")[3]) for r in (tmp_path / "metrics.csv").read_text().splitlines()[1:]]
    assert ckpt["step"] == 9 and losses[-1] < losses[0], losses  # it did train: 3 epochs of 3 batches
    on_disk = json.loads((tmp_path / "results.json").read_text())
    cov = on_disk["embeddings"]
    assert {k: cov[k] for k in COVERAGE} == COVERAGE and (cov["kind"], cov["freeze"]) == ("glove", True)
    assert on_disk["num_params"] == sum(
        p.numel() for p in build_model(upgrade_config(ckpt["config"])["model"], Vocab(vocab), 5).parameters()
    )  # the frozen rows are buffers
    # a checkpoint round trip: evaluate.py rebuilds the GloVe module, loads every row, scores the same
    assert rescored_test_acc(tmp_path, tmp_path / "eval") == on_disk["test_acc"]
    best = load_checkpoint(tmp_path / "checkpoints" / "best.pt")
    assert torch.equal(load_model(best)[0].embed.table(), full_table(best["model"]))


def full_table(state):
    """A frozen GloVe module's [V, 50] table, assembled from its state dict."""
    return state["embed.pretrained"].index_put((state["embed.missing_rows"],), state["embed.trainable"])


def test_fine_tuned_rows_change_in_training(treebank, tmp_path):
    glove_run(treebank, tmp_path, "model=treelstm", "graph=tree", "model.glove_freeze=false")
    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    vocab, table = ckpt["vocab"], ckpt["model"]["embed.trainable"]
    assert table.shape == (len(vocab), G.DIM) and "embed.pretrained" not in ckpt["model"]
    for word in ("good", "fun", "film"):
        assert not torch.equal(table[vocab.index(word)], glove_row(word)), word
    assert json.loads((tmp_path / "results.json").read_text())["embeddings"]["freeze"] is False


def test_learned_run_records_learned(treebank, tmp_path):
    results = glove_run(
        treebank, tmp_path, "model=treelstm", "graph=tree", "model.embeddings=learned", "trainer.max_epochs=1"
    )
    assert results["embeddings"] == {"kind": "learned"}


def test_old_checkpoint_without_the_key_loads_as_learned():
    old = torch.load(FIXTURES / "treelstm.pt", weights_only=True)
    assert "embeddings" not in old["config"]["model"]
    assert upgrade_config(old["config"])["model"]["embeddings"] == "learned"
    model = load_model(old)[0]
    assert isinstance(model.embed, nn.Embedding) and torch.equal(model.embed.weight, old["model"]["embed.weight"])


def test_missing_package_is_one_line_naming_make_install(monkeypatch):
    import importlib

    real = importlib.import_module

    def no_glove(name, *args, **kwargs):
        if name == G.PACKAGE:
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(G.importlib, "import_module", no_glove)
    monkeypatch.setattr(G, "_LOADED", {})
    with pytest.raises(ValueError, match=r"^GloVe vectors are not installed .*: run `make install`$"):
        build_model(model_cfg("treelstm"), Vocab.build(SENTENCES), 5)
