"""bench/pooling.py runs and writes its table (tiny sizes: it checks the script, not the speeds)."""

import pytest

from bench import pooling


def test_pooling_bench_writes_its_table(tmp_path):
    assert pooling.main(["--batches", "1", "--batch-size", "8", "--repeats", "1", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "pooling.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| reduction")]
    assert [r.split(" | ")[0] for r in rows] == ["| sum", "| mean", "| max, one per graph", "| max, (B, n, n, d)"]
    assert rows[0].endswith("| 1.00 |") and all(float(r.split(" | ")[1]) > 0 for r in rows)
    assert "faster than the (B, n, n, d) max, with the same values." in table


def test_pooling_bench_stops_when_the_two_max_paths_disagree(tmp_path, monkeypatch):
    monkeypatch.setattr(pooling.PoolAggregation, "max_complete", staticmethod(lambda h, valid: h))
    with pytest.raises(SystemExit, match="the two max paths disagree"):
        pooling.main(["--batches", "1", "--batch-size", "4", "--repeats", "1", "--out", str(tmp_path)])
