"""Real sentences above the readers (tests/data/test_corpora.py tests those): SST's gold trees through the
parsed splits, their cache and every graph construction; the errors a missing or broken data folder
gives; node logits for the phrase loss; short runs on the real files of ../shared/data (skipped where
they are not there)."""

import json

import pytest
import torch

import data.text as text
from data.batches import collate
from data.corpora import CorpusError, read_sst
from data.graph_dataset import GraphDataset
from data.graphs import make_construction
from data.splits import load_splits
from data.text import load_text_splits, tree_depth
from data.vocab import Vocab
from engine.checkpoint import load_checkpoint
from engine.config import check_config
from evaluate import evaluate
from models import build_model
from tests.conftest import assert_breakdowns_match_test_acc, compose_config
from tests.data.test_corpora import SHARED, needs_shared
from tests.engine.test_bad_input import cli
from train import run

# Hand-written trees: brackets escaped as the treebank does, a neutral sentence, a one-word sentence.
TREES = [
    "(4 (3 (2 -LRB-) (3 (3 Good) (2 -RRB-))) (4 (4 fun) (2 .)))",
    "(2 (2 It) (2 (2 is) (2 here)))",
    "(3 Good)",
    "(0 (1 (2 A) (1 bad)) (0 (0 awful) (2 film)))",
]
# Worked by hand: tokens 0..n-1 (unescaped, lowercased), then the phrases, children before parents.
GOLD = [
    {
        "tokens": ["(", "good", ")", "fun", "."],
        "parent": [6, 5, 5, 7, 7, 6, 8, 8, -1],  # 5 = (good )), 6 = (( 5), 7 = (fun .), 8 = the root
        "slot": [0, 0, 1, 0, 1, 1, 0, 1, -1],
        "node_labels": [2, 3, 2, 4, 2, 3, 3, 4, 4],
        "label": 4,
    },
    {
        "tokens": ["it", "is", "here"],
        "parent": [4, 3, 3, 4, -1],
        "slot": [0, 0, 1, 1, -1],
        "node_labels": [2, 2, 2, 2, 2],
        "label": 2,
    },
    {"tokens": ["good"], "parent": [-1], "slot": [-1], "node_labels": [3], "label": 3},
    {
        "tokens": ["a", "bad", "awful", "film"],
        "parent": [4, 4, 5, 5, 6, 6, -1],
        "slot": [0, 1, 0, 1, 0, 1, -1],
        "node_labels": [2, 1, 0, 2, 1, 0, 0],
        "label": 0,
    },
]


def write_treebank(folder, train=TREES, dev=TREES, test=TREES):
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in (("train.txt", train), ("dev.txt", dev), ("test.txt", test)):
        (folder / name).write_text("".join(line + "\n" for line in lines))
    return folder


@pytest.fixture(scope="module")
def treebank(tmp_path_factory):
    root = tmp_path_factory.mktemp("treebank")
    return {"dir": write_treebank(root / "trees"), "cache": root / "cache"}


def sst_cfg(treebank, *extra, name="sst"):
    return compose_config(
        [f"dataset={name}", f"dataset.data_dir={treebank['dir']}", f"dataset.cache_dir={treebank['cache']}"]
        + ["dataset.min_freq=1", *extra]
    )


@pytest.fixture(scope="module")
def splits(treebank):
    return load_text_splits(sst_cfg(treebank).dataset, progress=False)


def graphs_of(splits, graph, readout="mean"):
    vocab = Vocab.build(splits["train"]["tokens"])
    construction = make_construction({"name": graph}, vocab, {"readout": readout})
    return GraphDataset(splits["train"], vocab, construction, progress=False), vocab


def edge_set(g):
    src, dst = g.edges()
    return set(zip(src.tolist(), dst.tolist()))


def both_ways(parent):
    """The edges of a tree given by ``parent`` (-1 at a root), both ways, and a self loop at every node."""
    up = {(c, p) for c, p in enumerate(parent) if p >= 0}
    return up | {(p, c) for c, p in up} | {(i, i) for i in range(len(parent))}


# --------------------------------------------------------------------------------------------
# Gold trees: splits and graphs
# --------------------------------------------------------------------------------------------
def test_gold_trees_reach_the_splits(splits):
    assert {s: len(ds) for s, ds in splits.items()} == {"train": 4, "val": 4, "test": 4}
    for row, gold in zip(splits["train"], GOLD):
        assert {k: row[k] for k in gold} == gold  # -LRB- / -RRB- became ( and ), lowercased
        n = len(gold["tokens"])
        assert row["length"] == n and len(row["heads"]) == n and row["heads"].count(-1) == 1
        assert row["depth"] == tree_depth(row["heads"])
    assert splits["test"]["tokens"] == splits["train"]["tokens"]


@pytest.mark.parametrize("graph", ["tree", "dep", "binary_tree", "complete"])
def test_every_construction_on_gold_trees(splits, graph):
    data, vocab = graphs_of(splits, graph)
    for g, row, gold in zip(data.graphs, splits["train"], GOLD):
        n = len(gold["tokens"])
        labels = gold["node_labels"]
        if graph in ("tree", "binary_tree"):  # the gold tree itself, a node per phrase
            assert g.num_nodes() == 2 * n - 1
            assert edge_set(g) == both_ways(gold["parent"])
            assert g.ndata["parent"].tolist() == gold["parent"] and g.ndata["slot"].tolist() == gold["slot"]
            assert g.ndata["root"].nonzero().flatten().tolist() == [gold["parent"].index(-1)]  # the root phrase
            assert g.ndata["pos"].tolist() == list(range(n)) + [-1] * (n - 1)
            assert g.ndata["tok"][n:].tolist() == [vocab.phrase_id] * (n - 1) and vocab.phrase_id == 3
            assert g.ndata["tok"][:n].tolist() == vocab.encode(gold["tokens"])
            assert g.ndata["label"].tolist() == labels  # the tokens', then the phrases'
        else:  # tokens only
            assert g.num_nodes() == n
            assert g.ndata["label"].tolist() == labels[:n]
            assert g.ndata["tok"].tolist() == vocab.encode(gold["tokens"])
            if graph == "dep":  # spaCy's heads over the same tokens, not the gold tree
                assert edge_set(g) == both_ways(row["heads"])
                assert g.ndata["parent"].tolist() == row["heads"]
                assert g.ndata["root"].nonzero().flatten().tolist() == [row["heads"].index(-1)]
            else:
                assert g.num_edges() == n * n
    assert data.labels.tolist() == [gold["label"] for gold in GOLD]


@pytest.mark.parametrize("graph", ["tree", "dep", "complete"])
def test_cls_node_has_no_label(splits, graph):
    data, vocab = graphs_of(splits, graph, readout="cls")
    for g, gold in zip(data.graphs, GOLD):
        n = len(gold["tokens"])
        labelled = 2 * n - 1 if graph == "tree" else n
        assert g.num_nodes() == labelled + 1
        assert g.ndata["tok"][-1].item() == vocab.cls_id and g.ndata["pos"][-1].item() == -1
        assert g.ndata["label"].tolist() == gold["node_labels"][:labelled] + [-1]
        assert not g.ndata["root"][-1]


def test_binary_sst_drops_neutral_sentences_and_phrases(treebank):
    binary = load_text_splits(sst_cfg(treebank, name="sst_binary").dataset, progress=False)
    rows = binary["train"]
    assert rows["tokens"] == [GOLD[0]["tokens"], GOLD[2]["tokens"], GOLD[3]["tokens"]]  # "it is here" is neutral
    assert rows["label"] == [1, 1, 0]
    assert rows["node_labels"] == [[-1, 1, -1, 1, -1, 1, 1, 1, 1], [1], [-1, 0, 0, -1, 0, 0, 0]]
    assert rows["parent"] == [GOLD[0]["parent"], GOLD[2]["parent"], GOLD[3]["parent"]]
    data, _ = graphs_of(binary, "binary_tree", readout="root")
    assert [g.ndata["label"].tolist() for g in data.graphs] == rows["node_labels"]
    assert data.labels.tolist() == [1, 1, 0]
    # graph=bpt has as many nodes as the gold tree (2n - 1), but its spans are not the treebank's phrases
    data, _ = graphs_of(binary, "bpt")
    for g, toks, labels in zip(data.graphs, rows["tokens"], rows["node_labels"]):
        n = len(toks)
        assert g.ndata["label"].tolist() == labels[:n] + [-1] * (n - 1)


def test_single_word_sentence_is_one_node(splits):
    for graph in ("tree", "binary_tree", "dep"):
        g = graphs_of(splits, graph, readout="root")[0].graphs[2]
        assert g.num_nodes() == 1 and edge_set(g) == {(0, 0)} and g.ndata["root"].tolist() == [True]
        assert g.ndata["label"].tolist() == [3] and g.ndata["height"].tolist() == [0]


def test_sst_max_length_drops_long_sentences(treebank, tmp_path):
    cfg = sst_cfg(treebank, f"dataset.cache_dir={tmp_path}", "dataset.max_length=3").dataset
    lengths = load_text_splits(cfg, progress=False)["train"]["length"]
    assert max(lengths) <= 3


# --------------------------------------------------------------------------------------------
# The parse cache
# --------------------------------------------------------------------------------------------
def test_second_load_comes_from_the_cache(treebank, monkeypatch):
    cfg = sst_cfg(treebank).dataset
    first = load_text_splits(cfg, progress=False)  # parsed by the tests above, or now

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed again instead of reading the cache")

    monkeypatch.setattr(text, "parse_words", no_parsing)
    monkeypatch.setattr(text, "parse_texts", no_parsing)
    second = load_splits(cfg, progress=False)
    for split in ("train", "val", "test"):
        assert second[split].to_list() == first[split].to_list()
    [folder] = (treebank["cache"] / "parsed").glob("sst-*")
    assert (folder / "done").is_file() and not list(treebank["cache"].rglob("*.tmp"))


@pytest.mark.parametrize(
    "bad, message",
    [
        ("(3 (2 It) (3 works)", r"col \d+: the tree ends before its '\)'"),
        ("(7 (2 It) (3 works))", "col 2: a node's label must be 0-4, found '7'"),
    ],
    ids=["unbalanced", "label7"],
)
def test_malformed_tree_names_file_and_line_and_caches_nothing(tmp_path, bad, message):
    folder = write_treebank(tmp_path / "trees", dev=[TREES[0], bad, TREES[2]])
    cache = tmp_path / "cache"
    cfg = compose_config(["dataset=sst", f"dataset.data_dir={folder}", f"dataset.cache_dir={cache}"]).dataset
    with pytest.raises(CorpusError, match=message) as err:
        load_text_splits(cfg, progress=False)
    assert str(err.value).startswith(f"{folder / 'dev.txt'}:2: ") and "\n" not in str(err.value)
    assert not list(cache.rglob("done")) and not list(cache.rglob("*.tmp"))
    assert not (cache / "parsed").is_dir() or not list((cache / "parsed").iterdir())


# --------------------------------------------------------------------------------------------
# A missing or broken data folder, through train.py; configurations train.py refuses
# --------------------------------------------------------------------------------------------
def bad_folders(tmp_path):
    trec = tmp_path / "trec"
    trec.mkdir()
    (trec / "train_5500.label").write_text("NUM:dist How far is it ?\nHUM:ind Who is it ?\nWHAT:x Why ?\n")
    (trec / "TREC_10.label").write_text("NUM:dist How far ?\n")
    return {"tmp": tmp_path, "trec": trec, "trees": write_treebank(tmp_path / "trees", test=[TREES[0], "(2 (2 x)"])}


CLI_CASES = [
    (["dataset=sst"], "dataset=sst reads the treebank's own files: set dataset.data_dir to a folder with train.txt"),
    (["dataset=trec", "dataset.data_dir={trec}"], "{trec}/train_5500.label:3: unknown TREC class 'WHAT:x'"),
    (["dataset=sst", "dataset.data_dir={trees}"], "{trees}/test.txt:2: col 9: the tree ends before its ')'"),
]


@pytest.mark.parametrize("overrides, message", CLI_CASES, ids=["sst-no-dir", "trec-class", "bad-tree"])
def test_train_cli_bad_data(tmp_path, overrides, message):
    paths = bad_folders(tmp_path)
    out, cache = tmp_path / "run", tmp_path / "cache"
    args = [o.format(**paths) for o in overrides]
    rc, lines = cli("train.py", *args, f"dataset.cache_dir={cache}", "logger=none", "trainer.progress=false", out=out)
    assert rc == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert message.format(**paths) in lines[0]
    assert not (out / "results.json").exists() and not list(cache.rglob("done"))


@pytest.mark.parametrize(
    "name, files",
    [("sst", "train.txt, dev.txt, test.txt"), ("sst_binary", "train.txt"), ("trec", "train_5500.label, TREC_10.label")],
)
def test_missing_data_dir_names_the_files(tmp_path, name, files):
    missing = tmp_path / "nowhere"
    cfg = compose_config([f"dataset={name}", f"dataset.data_dir={missing}", f"dataset.cache_dir={tmp_path}", *COMMON])
    with pytest.raises(FileNotFoundError) as err:
        run(cfg, tmp_path / "run")
    message = str(err.value)
    assert message.startswith(f"dataset.data_dir={missing}: no such folder; it should hold {files}"), message
    assert "https://" in message and "\n" not in message
    assert not (tmp_path / "run" / "results.json").exists() and not list(tmp_path.rglob("done"))


def test_trec_without_data_dir_is_one_line_offline(tmp_path):
    cfg = compose_config(["dataset=trec", "dataset.fine=true", f"dataset.cache_dir={tmp_path}"]).dataset
    with pytest.raises(ValueError) as err:
        load_splits(cfg, progress=False)
    assert "cannot load CogComp/trec" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["graph=dep"], "graph=dep is the dependency parse of text, and dataset=listops is not text: use graph=tree"),
        (["dataset=trec", "trainer.phrase_loss=true"], "dataset=trec has none: use dataset=sst or dataset=sst_binary"),
        (["dataset=sst2", "trainer.phrase_loss=true"], "or trainer.phrase_loss=false"),
    ],
    ids=["dep-listops", "phrase-loss-trec", "phrase-loss-sst2"],
)
def test_check_config_refuses(overrides, message, tmp_path):
    cfg = compose_config(overrides)
    with pytest.raises(ValueError, match=message) as err:
        check_config(cfg)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=message):  # before any work: nothing written
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_check_config_accepts_what_it_should():
    check_config(compose_config(["dataset=sst", "trainer.phrase_loss=true", "graph=tree", "model=treelstm"]))
    check_config(compose_config(["dataset=sst_binary", "trainer.phrase_loss=true", "graph=dep"]))
    check_config(compose_config(["dataset=trec", "graph=dep", "model=gcn"]))


# --------------------------------------------------------------------------------------------
# Node logits (trainer.phrase_loss)
# --------------------------------------------------------------------------------------------
def model_on(splits, name, graph, readout, *extra):
    data, vocab = graphs_of(splits, graph, readout=readout)
    cfg = compose_config([f"model={name}", f"model.readout={readout}", "model.hidden_dim=16", *extra]).model
    construction = make_construction({"name": graph}, vocab, cfg)
    torch.manual_seed(0)
    model = build_model(cfg, len(vocab), 5, construction).eval()
    g, _ = collate([data[i] for i in range(len(data))])
    return model, g


@pytest.mark.parametrize(
    "name, graph, readout, extra",
    [
        ("transformer", "tree", "mean", ["model.num_layers=2"]),
        ("transformer", "tree", "root", ["model.num_layers=2"]),
        ("transformer", "dep", "root", ["model.num_layers=2"]),
        ("gcn", "tree", "mean", ["model.num_layers=2"]),
        ("gcn", "binary_tree", "root", ["model.num_layers=2"]),
        ("treelstm", "tree", "root", []),
        ("treelstm", "binary_tree", "root", ["model.cell=binary"]),
    ],
)
def test_node_logits(splits, name, graph, readout, extra):
    model, g = model_on(splits, name, graph, readout, *extra)
    with torch.no_grad():
        graph_logits, node_logits = model(g, nodes=True)
        alone = model(g)
    assert node_logits.shape == (g.num_nodes(), 5) and graph_logits.shape == (4, 5)
    assert torch.equal(graph_logits, alone)
    if readout == "root":  # the root's logits are its node's logits
        torch.testing.assert_close(graph_logits, node_logits[g.ndata["root"]], rtol=0, atol=1e-6)


@pytest.mark.parametrize("graph, readout", [("tree", "mean"), ("tree", "root"), ("dep", "mean"), ("complete", "cls")])
def test_transformer_sparse_and_dense_node_logits_agree(splits, graph, readout):
    model, g = model_on(splits, "transformer", graph, readout, "model.num_layers=2")
    out = {}
    for impl in ("sparse", "dense"):
        model.impl = impl
        with torch.no_grad():
            out[impl] = model(g, nodes=True)
    torch.testing.assert_close(out["dense"][0], out["sparse"][0], rtol=0, atol=1e-5)
    torch.testing.assert_close(out["dense"][1], out["sparse"][1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("impl", ["sparse", "dense"])
def test_cls_readout_on_gold_trees_gives_one_row_per_sentence(splits, impl):
    model, g = model_on(splits, "transformer", "tree", "cls", "model.num_layers=1", f"model.impl={impl}")
    with torch.no_grad():
        assert model(g).shape == (4, 5)


# --------------------------------------------------------------------------------------------
# Train and evaluate on the hand-written trees (no real data needed)
# --------------------------------------------------------------------------------------------
def small_run(folder, cache, *extra):
    return [
        "dataset=sst",
        f"dataset.data_dir={folder}",
        f"dataset.cache_dir={cache}",
        "dataset.min_freq=1",
        "graph=tree",
        "model=treelstm",
        "model.hidden_dim=16",
        "trainer.phrase_loss=true",
        "trainer.max_epochs=2",
        "trainer.batch_size=2",
        "logger=none",
        "trainer.progress=false",
        *extra,
    ]


def test_sst_trains_and_evaluate_reproduces(treebank, tmp_path):
    results = run(compose_config(small_run(treebank["dir"], treebank["cache"])), tmp_path / "run")
    assert results["dataset"] == "sst" and results["num_examples"] == {"train": 4, "val": 4, "test": 4}
    ckpt = tmp_path / "run" / "checkpoints" / "best.pt"
    assert load_checkpoint(ckpt)["num_classes"] == 5
    ev = evaluate(compose_config([f"checkpoint={ckpt}"], config_name="evaluate"), tmp_path / "eval")
    assert ev["accuracy"] == results["test_acc"]
    on_file = compose_config([f"checkpoint={ckpt}", f"data_file={treebank['dir'] / 'test.txt'}"], "evaluate")
    assert evaluate(on_file, tmp_path / "eval_file")["accuracy"] == results["test_acc"]


def trains(overrides, out):
    """``run``, with a training failure reported as such (not as the evaluation's)."""
    try:
        return run(compose_config(overrides), out)
    except Exception as e:
        pytest.fail(f"training failed: {type(e).__name__}: {e}")


def test_evaluate_scores_a_test_split_with_unseen_words(tmp_path):
    folder = write_treebank(tmp_path / "trees", test=[TREES[0], "(3 (2 A) (4 splendid))"])
    results = trains(small_run(folder, tmp_path / "cache"), tmp_path / "run")
    ckpt = tmp_path / "run" / "checkpoints" / "best.pt"
    ev = evaluate(compose_config([f"checkpoint={ckpt}"], config_name="evaluate"), tmp_path / "eval")
    assert ev["accuracy"] == results["test_acc"]


def write_glue(folder, rows):
    """A GLUE SST-2 folder (``sentence<TAB>label``) holding ``rows`` as both train and dev."""
    folder.mkdir(parents=True, exist_ok=True)
    body = "sentence\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows)
    for name in ("train.tsv", "dev.tsv"):
        (folder / name).write_text(body)
    return folder


def test_evaluate_scores_another_datasets_split(tmp_path):
    """A model trained on GLUE SST-2 phrases scores binary SST's test sentences (``dataset=sst_binary``)
    exactly as it scores the same sentences written as a GLUE file; a dataset with other labels is refused."""
    phrases = [("good fun", 1), ("a bad film", 0), ("awful", 0), ("good", 1), ("fun and good", 1), ("bad", 0)] * 4
    glue = write_glue(tmp_path / "glue", phrases)
    trains(
        ["dataset=sst2", f"dataset.data_dir={glue}", f"dataset.cache_dir={tmp_path / 'cache'}", "dataset.val_size=4"]
        + ["dataset.min_freq=1", "model=gcn", "model.hidden_dim=16", "trainer.max_epochs=1", "logger=none"]
        + ["trainer.progress=false"],
        tmp_path / "run",
    )
    ckpt = tmp_path / "run" / "checkpoints" / "best.pt"
    # binary SST's test split: the neutral tree (label 2) is dropped, 4 -> 1, 3 -> 1, 0 -> 0
    trees = write_treebank(tmp_path / "trees", test=[*TREES, "(1 (2 a) (1 (1 bad) (2 fun)))"])
    other = [f"checkpoint={ckpt}", "dataset=sst_binary", f"dataset.data_dir={trees}"]
    ev = evaluate(compose_config([*other, f"dataset.cache_dir={tmp_path / 'cache'}"], "evaluate"), tmp_path / "ev")
    assert ev["data"] == "sst_binary/test" and sum(map(sum, ev["confusion"])) == 4
    # the same four sentences, their tokens joined by spaces, as a GLUE file of the checkpoint's own dataset
    sentences = [("( good ) fun .", 1), ("good", 1), ("a bad awful film", 0), ("a bad fun", 0)]
    as_file = write_glue(tmp_path / "as_file", sentences) / "dev.tsv"
    ev_file = evaluate(compose_config([f"checkpoint={ckpt}", f"data_file={as_file}"], "evaluate"), tmp_path / "evf")
    assert ev["accuracy"] == ev_file["accuracy"] and ev["confusion"] == ev_file["confusion"]
    with pytest.raises(ValueError, match="dataset=sst has 5 classes and the checkpoint 2 .* same labels"):
        evaluate(
            compose_config([f"checkpoint={ckpt}", "dataset=sst", f"dataset.data_dir={trees}"], "evaluate"), tmp_path
        )


# --------------------------------------------------------------------------------------------
# The real files: one short run per dataset, sharing one parse cache
# --------------------------------------------------------------------------------------------
COMMON = ["model.hidden_dim=32", "logger=none", "trainer.progress=false"]
FEW = ["dataset.num_train=300", "trainer.max_epochs=1"]
REAL = {
    "sst": (["dataset.data_dir={shared}/sst", "graph=tree", "model=treelstm", "trainer.phrase_loss=true", *FEW]),
    # a seeded sample of 2,000 (the file is sorted by sentiment: a head slice would be 94% positive)
    "sst_binary": [
        "dataset.data_dir={shared}/sst",
        "dataset.num_train=2000",
        "graph=binary_tree",
        "model=treelstm",
        "model.cell=binary",
        "trainer.phrase_loss=true",
        "trainer.max_epochs=4",
        "optim.lr=3e-3",
    ],
    "trec": [
        "dataset.data_dir={shared}/trec",
        "dataset.fine=true",
        "graph=dep",
        "model=gcn",
        "model.num_layers=2",
        *FEW,
    ],
    "sst2": ["dataset.data_dir={shared}/sst2", "graph=complete", "model=gat", "model.num_layers=2", *FEW],
}
EXPECTED = {  # dataset: (num_examples, num_classes)
    "sst": ({"train": 300, "val": 1101, "test": 2210}, 5),
    "sst_binary": ({"train": 2000, "val": 872, "test": 1821}, 2),  # 6,920 in all: tests/data/test_corpora.py
    "trec": ({"train": 300, "val": 500, "test": 500}, 50),
    "sst2": ({"train": 300, "val": 872, "test": 872}, 2),  # GLUE's dev split is our test split
}


@pytest.fixture(scope="session")
def real_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("real-parse-cache")


@pytest.fixture(scope="session")
def trained(real_cache, tmp_path_factory):
    """``trained(name)``: (config, results, run dir) of the one short run per dataset of this session."""
    done = {}

    def get(name):
        if name not in done:
            overrides = [o.format(shared=SHARED) for o in REAL[name]]
            cfg = compose_config([f"dataset={name}", f"dataset.cache_dir={real_cache}", *overrides, *COMMON])
            out = tmp_path_factory.mktemp(f"run-{name}")
            done[name] = (cfg, run(cfg, out), out)
        return done[name]

    return get


@needs_shared
@pytest.mark.parametrize("name", list(REAL))
def test_real_run(trained, name):
    cfg, results, out = trained(name)
    counts, num_classes = EXPECTED[name]
    assert results["dataset"] == name and results["num_examples"] == counts
    assert results["graph"] == cfg.graph.name and results["model"] == cfg.model.name
    assert json.loads((out / "results.json").read_text()) == results
    assert results["best_epoch"] >= 1
    assert_breakdowns_match_test_acc(results)  # rescored from best.pt in test_real_evaluate_reproduces_test_accuracy
    ckpt = load_checkpoint(out / "checkpoints" / "best.pt")
    assert ckpt["num_classes"] == num_classes and ckpt["config"]["dataset"]["name"] == name
    rows = (out / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + cfg.trainer.max_epochs


@needs_shared
def test_real_sst_tokens_are_unescaped_and_trees_whole(trained):
    cfg, _, _ = trained("sst")
    splits = load_text_splits(cfg.dataset, progress=False)  # the run's cache
    tokens = {t for s in ("train", "val", "test") for sent in splits[s]["tokens"] for t in sent}
    assert {"(", ")"} <= tokens and not {"-lrb-", "-rrb-", "-LRB-"} & tokens
    for row in splits["val"].select(range(50)):
        n = row["length"]
        assert len(row["parent"]) == len(row["node_labels"]) == 2 * n - 1 and len(row["heads"]) == n


@needs_shared
@pytest.mark.parametrize("name", list(REAL))
def test_real_evaluate_reproduces_test_accuracy(trained, name, tmp_path):
    try:
        _, results, out = trained(name)
    except Exception as e:  # a training failure, reported as such
        pytest.fail(f"training failed: {type(e).__name__}: {e}")
    cfg = compose_config([f"checkpoint={out / 'checkpoints' / 'best.pt'}"], config_name="evaluate")
    assert evaluate(cfg, tmp_path)["accuracy"] == results["test_acc"]


@needs_shared
def test_binary_sst_learns_beyond_chance(trained):
    """Four epochs on 2,000 sentences of a small binary Tree-LSTM with the phrase loss: well above the majority class (50.1%)."""
    _, results, _ = trained("sst_binary")
    assert results["best_val_acc"] > 0.58 and results["test_acc"] > 0.58, results


@needs_shared
def test_sst_num_train_is_a_sample_of_the_training_split(trained):
    cfg, _, _ = trained("sst")
    capped = load_text_splits(cfg.dataset, progress=False)["train"]["label"]
    full = [t["label"] for t in read_sst(SHARED / "sst" / "train.txt")]

    def negative(labels):
        return sum(y <= 1 for y in labels) / len(labels)

    assert abs(negative(capped) - negative(full)) < 0.1


def test_attention_syntax_against_gold_and_dependency_trees(treebank, tmp_path, capsys):
    """studies/attention_syntax on a complete-graph Transformer trained on SST: both trees, one report each."""
    from studies import attention_syntax

    extra = ["graph=complete", "model=transformer", "model.num_heads=2", "trainer.phrase_loss=false"]
    run(compose_config(small_run(treebank["dir"], treebank["cache"], *extra)), tmp_path / "run")
    for tree in ("gold", "dep"):
        out = tmp_path / tree
        assert attention_syntax.main([str(tmp_path / "run"), "--tree", tree, "--out", str(out)]) == 0
        result = json.loads((out / "syntax.json").read_text())
        assert result["tree"] == tree and len(result["mass_on_tree"]) == 4  # the transformer's 4 layers
        key = "sister_acc" if tree == "gold" else "parent_acc"
        assert all(0 <= v <= 1 for row in result[key] for v in row)
        assert (out / "syntax_heads.png").is_file() and (out / "syntax_example.png").is_file()
    assert "sister constituent" in capsys.readouterr().out
