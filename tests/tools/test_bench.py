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


def test_loop_bench_writes_a_row_per_case_and_precision(tmp_path):
    from bench.loop import main as loop_main

    args = ["--device", "cpu", "--cases", "gat_complete_64", "--epochs", "1", "--num-train", "64"]
    assert loop_main(args + ["--precisions", "fp32", "bf16", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "loop.md").read_text()
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| gat_complete_64 |")]
    assert [(r[1], r[2], r[3]) for r in rows] == [("cpu", "fp32", "64"), ("cpu", "bf16", "64")]
    for r in rows:  # examples/s is the split's 64 examples over the epoch's seconds (printed to 0.01 s)
        for seconds, per_second in ((r[5], r[7]), (r[6], r[8])):
            eps, s_ = float(per_second.replace(",", "")), float(seconds)
            assert 64 / (s_ + 0.005) - 1 <= eps <= 64 / max(s_ - 0.005, 1e-9) + 1
    assert "python -m bench.loop --device cpu" in table and "on cpu-" in table
    with pytest.raises(SystemExit):  # an unknown precision stops at the argument parser
        loop_main(args + ["--precisions", "fp16"])
    with pytest.raises(SystemExit, match="--machine 'a b'"):  # a bad folder name, before any timing
        loop_main(args + ["--machine", "a b"])


@pytest.mark.slow
def test_gpu_script_runs_its_steps_and_packs_what_finished(tmp_path):
    """bench/gpu.sh at tiny sizes on the CPU (QUICK=1 DEVICE=cpu), the card step only: three timed runs of
    the card's command, their table, and one archive with everything (about a minute)."""
    import os
    import subprocess
    import sys
    import tarfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "QUICK": "1", "DEVICE": "cpu", "STEPS": "card", "PYTHON": sys.executable}
    done = subprocess.run(["bash", "bench/gpu.sh", str(tmp_path)], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    table = (tmp_path / "work" / "card.md").read_text()
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| gpu_") or line.startswith("| cpu_")]
    assert [r[0] for r in rows] == ["| gpu_built", "| gpu_cached", "| cpu_cached"]
    assert all(float(r[1]) > 0 and 0 <= float(r[2].rstrip(" |")) <= 1 for r in rows)  # a wall time, a test accuracy
    assert "GPU wall / CPU wall" in table
    steps = (tmp_path / "work" / "logs" / "steps.txt").read_text()
    assert "card_cpu_cached rc=0" in steps and "loop" not in steps  # STEPS chose the card alone
    with tarfile.open(tmp_path / "gpu.tgz") as tar:
        names = tar.getnames()
    assert "./card.md" in names and not any("cache" in n.split("/")[1:2] for n in names)
