"""Evaluation data the model did not train on: disjoint splits, and files that leave the training pool out."""

from data import listops
from data.splits import load_splits
from studies import long_range
from tests.conftest import compose_config


def _tuples(rows):
    return [tuple(t) for t in rows]


def test_generated_splits_are_disjoint():
    cfg = compose_config(["dataset.num_train=3000", "dataset.num_val=500", "dataset.num_test=500"]).dataset
    splits = {name: set(_tuples(ds["tokens"])) for name, ds in load_splits(cfg, progress=False).items()}
    assert splits["train"] & splits["val"] == set()
    assert splits["train"] & splits["test"] == set()
    assert splits["val"] & splits["test"] == set()
    assert len(splits["train"]) > 2500  # short expressions repeat within a split; across splits they may not


def test_long_range_short_set_leaves_the_training_pool_out(tmp_path, monkeypatch):
    monkeypatch.setattr(long_range, "SETS", long_range.SETS[:1])  # LRA 1-100: the set that can overlap
    (path,) = long_range.make_sets(300, tmp_path, exclude=2000).values()
    rows = _tuples(r["tokens"] for r in listops.read_tsv(path))
    pool = set(_tuples(e["tokens"] for e in listops.generate(2000, seed=0, max_length=100)))
    assert len(rows) == 300 and not pool & set(rows)  # without the exclusion about 1 in 10 would be in it


def test_a_data_file_written_with_exclude_num_overlaps_no_training_expression(tmp_path):
    out = tmp_path / "unseen.tsv"
    assert listops.main(["--num", "300", "--seed", "123", "--exclude-num", "2000", "--out", str(out)]) == 0
    rows = _tuples(r["tokens"] for r in listops.read_tsv(out))
    pool = set(_tuples(e["tokens"] for e in listops.generate(2000, seed=0, max_length=100)))
    assert len(rows) == 300 and not pool & set(rows)
