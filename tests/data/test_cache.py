"""Data built once (data/cache.py): generated ListOps splits and their graphs are cached on disk.

Reused by the next run (the builder is not called), identical to building them again (rows, features,
fingerprints, every graph's edges and data; the same training result for the same seed), rebuilt when the
key changes, and rebuilt after exactly one warning when a cache file is corrupted or truncated.
"""

import logging

import pytest
import torch

from data import cache, listops
from data.graph_dataset import GraphDataset
from data.graphs import GraphConstruction
from data.splits import load_splits
from data.vocab import Vocab
from tests.conftest import compose_config
from train import run

SMALL = {
    "name": "listops",
    "num_train": 120,
    "num_val": 30,
    "num_test": 30,
    "max_length": 30,
    "min_length": 1,
    "root_operator": False,
    "shuffle": True,
    "max_depth": 20,
    "max_args": 5,
    "p_operator": 0.25,
    "sampler": "reject",
    "seed": 0,
}


@pytest.fixture
def builds(monkeypatch):
    """Counts the calls of the ListOps split builder."""
    calls = []
    real = listops._build_listops_splits

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(listops, "_build_listops_splits", counting)
    return calls


def same_splits(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].features == b[name].features
        assert a[name][:] == b[name][:]
        assert a[name]._fingerprint == b[name]._fingerprint  # the graph cache is keyed by it


def cache_files(root, folder):
    return sorted((root / folder).glob("*.bin"))


def warnings_of(caplog):
    return [r for r in caplog.records if r.levelno == logging.WARNING]


def test_splits_reused_then_rebuilt_on_a_changed_key(tmp_path, builds):
    cfg = {**SMALL, "cache_dir": str(tmp_path)}
    fresh = load_splits({**SMALL, "cache_dir": None}, progress=False)  # no cache at all
    first = load_splits(cfg, progress=False)
    second = load_splits(cfg, progress=False)
    assert len(builds) == 2  # the uncached load and the first cached one; the second read the file
    same_splits(fresh, first)
    same_splits(fresh, second)
    assert len(cache_files(tmp_path, "listops")) == 1
    for key, value in (("seed", 1), ("num_train", 121), ("max_length", 31), ("shuffle", False), ("sampler", "budget")):
        changed = load_splits({**cfg, key: value}, progress=False)
        assert changed["train"][:] != first["train"][:], key
    assert len(builds) == 7 and len(cache_files(tmp_path, "listops")) == 6


@pytest.mark.parametrize("damage", ["corrupt", "truncate"])
def test_a_damaged_split_cache_is_rebuilt_with_one_warning(tmp_path, builds, caplog, damage):
    cfg = {**SMALL, "cache_dir": str(tmp_path)}
    first = load_splits(cfg, progress=False)
    (path,) = cache_files(tmp_path, "listops")
    data = bytearray(path.read_bytes())
    if damage == "corrupt":
        data[len(data) // 2] ^= 0xFF  # one flipped byte: still the right length, and maybe still loadable
    else:
        data = data[: len(data) - 100]
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        again = load_splits(cfg, progress=False)
    (warning,) = warnings_of(caplog)
    expected = "checksum mismatch" if damage == "corrupt" else "truncated"
    assert str(path) in warning.getMessage() and expected in warning.getMessage()
    assert len(builds) == 2
    same_splits(first, again)
    caplog.clear()
    load_splits(cfg, progress=False)  # the rebuilt file is whole again: read without a warning
    assert len(builds) == 2 and not warnings_of(caplog)


def graph_sets(tmp_path, construction=None):
    splits = load_splits({**SMALL, "cache_dir": str(tmp_path)}, progress=False)
    vocab = Vocab.build(splits["train"]["tokens"])
    construction = construction or GraphConstruction(name="tree", pe="lap_pe", pe_dim=4)
    return splits["val"], vocab, construction


def same_graphs(a, b):
    assert len(a) == len(b)
    for ga, gb in zip(a, b):
        assert ga.idtype == gb.idtype and ga.num_nodes() == gb.num_nodes()
        for x, y in zip(ga.edges(), gb.edges()):
            assert torch.equal(x, y)
        for store_a, store_b in ((ga.ndata, gb.ndata), (ga.edata, gb.edata)):
            assert sorted(store_a.keys()) == sorted(store_b.keys())
            for k in store_a.keys():
                assert store_a[k].dtype == store_b[k].dtype and torch.equal(store_a[k], store_b[k]), k


def test_graphs_reused_identical_and_rebuilt_when_damaged(tmp_path, monkeypatch, caplog):
    ds, vocab, construction = graph_sets(tmp_path)
    fresh = GraphDataset(ds, vocab, construction, "val", progress=False)  # no cache
    built = GraphDataset(ds, vocab, construction, "val", progress=False, cache_dir=tmp_path)

    def no_building(*args, **kwargs):
        raise AssertionError("built the graphs again instead of reading the cache")

    with monkeypatch.context() as m:
        m.setattr(type(construction), "__call__", no_building)
        cached = GraphDataset(ds, vocab, construction, "val", progress=False, cache_dir=tmp_path)
        same_graphs(cached.graphs, fresh.graphs)
        assert cached.sizes == fresh.sizes and torch.equal(cached.labels, fresh.labels) and cached.meta == fresh.meta
        assert cached.unknown_share == fresh.unknown_share
    same_graphs(built.graphs, fresh.graphs)
    # another construction is another key: built, not read
    other = GraphDataset(ds, vocab, GraphConstruction(name="window"), "val", progress=False, cache_dir=tmp_path)
    assert other.cache_path != cached.cache_path and len(cache_files(tmp_path, "graphs")) == 2
    for damage in ("corrupt", "truncate"):
        data = bytearray(cached.cache_path.read_bytes())
        if damage == "corrupt":
            data[-10] ^= 0x01
        else:
            data = data[:-1]
        cached.cache_path.write_bytes(bytes(data))
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            rebuilt = GraphDataset(ds, vocab, construction, "val", progress=False, cache_dir=tmp_path)
        assert len(warnings_of(caplog)) == 1, damage
        same_graphs(rebuilt.graphs, fresh.graphs)


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    assert cache.cache_root({"name": "listops"}) == tmp_path
    assert cache.cache_root({"name": "sst", "cache_dir": "elsewhere"}).name == "elsewhere"
    assert cache.cache_root({"name": "listops", "cache_dir": None}) is None  # dataset.cache_dir=null: off
    monkeypatch.setenv(cache.ENV, "")
    assert cache.cache_root({"name": "listops"}) is None
    monkeypatch.delenv(cache.ENV)
    assert str(cache.cache_root({})) == cache.DEFAULT


def test_same_training_result_from_cached_data(tmp_path, monkeypatch):
    """train.py on cached splits and graphs ends where it ends on freshly built ones, for the same seed."""
    overrides = ["debug=tiny", "trainer.progress=false", "logger=none", "trainer.max_epochs=1", "model=gat"]
    monkeypatch.setenv(cache.ENV, "")  # no cache: built from scratch
    fresh = run(compose_config(overrides), tmp_path / "fresh")
    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    first = run(compose_config(overrides), tmp_path / "first")  # builds and writes
    assert cache_files(tmp_path / "cache", "listops") and cache_files(tmp_path / "cache", "graphs")
    monkeypatch.setattr(listops, "_build_listops_splits", lambda *a, **k: pytest.fail("splits built again"))
    second = run(compose_config(overrides), tmp_path / "second")  # reads
    for r in (first, second):
        assert r["test_acc"] == fresh["test_acc"] and r["best_val_acc"] == fresh["best_val_acc"]
        assert r["test_loss"] == fresh["test_loss"]  # the same weights: the same loss to the last bit


def test_arrow_columns_and_counts_are_the_rows():
    """train.py reads columns and the vocabulary's counts through Arrow: the same as going row by row."""
    from data.splits import column, token_counts

    splits = load_splits({**SMALL, "cache_dir": None}, progress=False)
    ds = splits["train"].select(range(0, 120, 3))  # with an indices mapping, as a selected split has
    assert column(ds, "length") == [len(t) for t in ds["tokens"]] and column(ds, "label") == list(ds["label"])
    assert token_counts(ds) == Vocab.build(ds["tokens"]).counts
    assert Vocab.from_counts(token_counts(ds), min_freq=3) == Vocab.build(ds["tokens"], min_freq=3)


def _write_many(path, seed):
    for i in range(30):
        cache.write(path, bytes([seed]) * (200_000 + i))


def test_parallel_writers_never_leave_a_partial_file(tmp_path, caplog):
    """Sweep jobs building the same data at once: every read sees a whole file (or none), no warning."""
    import multiprocessing

    path = tmp_path / "graphs" / "train-key.bin"
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=_write_many, args=(path, seed)) for seed in (1, 2, 3)]
    for w in writers:
        w.start()
    seen = set()
    with caplog.at_level(logging.WARNING):
        while any(w.is_alive() for w in writers):
            payload = cache.read(path, "graph")
            if payload is not None:
                assert len(set(payload)) == 1  # one writer's bytes, whole
                seen.add(payload[0])
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert not warnings_of(caplog) and seen
    assert sorted(p.name for p in path.parent.iterdir()) == ["train-key.bin"]  # no temporary file left behind


def test_packed_graphs_batch_equals_dgl_batch(tmp_path):
    import dgl

    from data.batches import PackedGraphs, pack_graphs

    ds, vocab, construction = graph_sets(tmp_path)
    fresh = GraphDataset(ds, vocab, construction, "val", progress=False)
    packed = PackedGraphs(pack_graphs(fresh.graphs))
    indices = [5, 0, 17, 3, 29]
    mine, theirs = packed.batch(indices), dgl.batch([fresh.graphs[i] for i in indices])
    same_graphs([mine], [theirs])
    assert torch.equal(mine.batch_num_nodes(), theirs.batch_num_nodes())
    assert torch.equal(mine.batch_num_edges(), theirs.batch_num_edges())


def test_loader_batches_a_cached_split_straight_from_the_arrays(tmp_path, monkeypatch):
    """A split read from the cache is batched by PackedGraphs.batch (no graph made one by one), and every batch,
    labels included, equals the collate of a freshly built split's."""
    from data.batches import Batches, PackedGraphs, TrainBatches, collate

    ds, vocab, construction = graph_sets(tmp_path)
    fresh = GraphDataset(ds, vocab, construction, "val", progress=False)
    GraphDataset(ds, vocab, construction, "val", progress=False, cache_dir=tmp_path / "c")  # writes the cache
    cached = GraphDataset(ds, vocab, construction, "val", progress=False, cache_dir=tmp_path / "c")
    assert isinstance(cached.graphs, PackedGraphs)
    monkeypatch.setattr(PackedGraphs, "_make", lambda self, i: pytest.fail("a graph made one by one"))
    order = TrainBatches(cached.sizes, 8, seed=3)
    for (g, y), indices in zip(Batches(cached, order), TrainBatches(fresh.sizes, 8, seed=3)):
        want_g, want_y = collate([fresh[i] for i in indices])
        same_graphs([g], [want_g])
        assert torch.equal(g.batch_num_nodes(), want_g.batch_num_nodes()) and torch.equal(y, want_y)


def test_lap_pe_graphs_cached_before_the_fixed_basis_are_not_reused(tmp_path):
    """lap_pe's repeated eigenspaces got a fixed basis (data/graphs/positional.py): its graphs' cache key
    changed, so a cache of the old positions is never read; every other construction's key did not."""
    import dataclasses

    from data.graph_cache import GRAPHS_FORMAT

    for pe, same_key in ((None, True), ("random_walk_pe", True), ("lap_pe", False)):
        ds, vocab, construction = graph_sets(tmp_path, GraphConstruction(name="tree", pe=pe, pe_dim=4))
        built = GraphDataset(ds, vocab, construction, "val", progress=False, cache_dir=tmp_path)
        old = cache.key_digest(GRAPHS_FORMAT, ds._fingerprint, dataclasses.asdict(construction), vocab.to_list())
        assert (built.cache_path.name == f"val-{old}.bin") is same_key, pe


def test_construction_keys_are_as_before_and_a_construction_pickles():
    """A construction's kind is ``GRAPH_KINDS[name]``, read when asked, and no field: the graph cache's key (its
    fields) is what it was before constructions held their kind (the digests below were computed at 78e2db6),
    and a pickled copy (a loader's worker, a tool) equals the original and builds the same graph."""
    import dataclasses
    import pickle

    from data.graph_cache import GRAPHS_FORMAT
    from data.graphs import GRAPH_KINDS
    from data.wordpiece import PieceConstruction

    vocab = Vocab.build([["a", "b"]])
    expected = [
        (GraphConstruction("window", window=1), "aec632654b818f7dd84d"),
        (GraphConstruction("tree", cls_id=3, pe="lap_pe"), "d8390e884e3846840257"),
        (PieceConstruction("dep", "tok.json", distances="dep"), "0442a14a90543749f937"),
    ]
    for construction, digest in expected:
        spec = dataclasses.asdict(construction)
        assert cache.key_digest(GRAPHS_FORMAT, "fingerprint", spec, vocab.to_list()) == digest, construction
        assert construction.kind is GRAPH_KINDS[construction.name]
        copy = pickle.loads(pickle.dumps(construction))
        assert copy == construction and copy.kind is construction.kind
    window = GraphConstruction("window", window=1)
    a, b = window([3, 4, 5]), pickle.loads(pickle.dumps(window))([3, 4, 5])
    assert [t.tolist() for t in a.edges()] == [t.tolist() for t in b.edges()] and a.num_edges() == 7
    with pytest.raises(ValueError, match="^unknown graph 'star'; valid graphs: complete, "):
        GraphConstruction("star")
