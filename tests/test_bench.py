"""The benchmark script runs and writes what `make bench` promises (tiny sizes: it checks, not measures)."""

import csv

import pytest

from bench.hardware_lottery import main


def test_quick_bench_writes_csv_plot_and_table(tmp_path):
    assert (
        main(
            [
                "--quick",
                "--skip",
                "memory",
                "training",
                "--out",
                str(tmp_path),
                "--graphs",
                "complete",
                "tree",
                "--threshold",
                "0",
            ]
        )
        == 0
    )
    with open(tmp_path / "layer.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["graph"], r["impl"]) for r in rows} == {
        (g, i) for g in ("complete", "tree") for i in ("sparse", "dense", "auto")
    }
    for r in rows:  # each row's density is its edges over the padded n x n pairs of its batch
        assert float(r["density"]) == pytest.approx(int(r["edges"]) / (int(r["batch"]) * int(r["n"]) ** 2), rel=1e-3)
    assert {float(r["density"]) for r in rows if r["graph"] == "complete"} == {1.0}  # every pair, self loops too
    assert {r["chosen"] for r in rows if r["impl"] == "auto"} == {"dense"}  # threshold 0: always dense
    table = (tmp_path / "summary.md").read_text()
    assert "| complete |" in table and "sparse ms / dense ms" in table and "bare SDPA block" in table
    assert (tmp_path / "layer.png").stat().st_size > 1000


def test_padding_shares():
    from bench.padding import shares

    assert shares([10] * 64, 16, bucket=False) == (1.0, 1.0)  # equal lengths: nothing padded
    lengths = [4, 100] * 64
    random_tok, random_pair = shares(lengths, 16, bucket=False)
    bucket_tok, bucket_pair = shares(lengths, 16, bucket=True)
    assert bucket_tok == bucket_pair == 1.0  # two lengths, pools sorted: every batch is one length
    assert random_pair < random_tok < 1.0


def test_recursive_bench_writes_its_table(tmp_path):
    from bench.recursive import main as recursive_main

    assert recursive_main(["--quick", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "recursive.csv") as f:
        rows = {r["model"]: r for r in csv.DictReader(f)}
    assert float(rows["transformer/tree (4 layers)"]["vs_transformer"]) == 1.0
    base = float(rows["transformer/tree (4 layers)"]["ms_per_step"])
    for r in rows.values():  # the ratio column is each model's step time over the Transformer's
        assert float(r["vs_transformer"]) == pytest.approx(float(r["ms_per_step"]) / base)
    binary = rows["treelstm binary/binary_tree"]
    assert float(binary["nodes"]) > float(rows["treelstm childsum/tree"]["nodes"])  # phrase nodes
    assert "| treelstm childsum/tree |" in (tmp_path / "recursive.md").read_text()
