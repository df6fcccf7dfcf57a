"""bench/scaling.py runs and writes its CSV, table and plot (tiny sizes: it checks the script, not the numbers)."""

import csv

from bench.scaling import CASES, case_name, main


def test_scaling_bench_writes_csv_table_and_plot(tmp_path):
    sizes = (32, 64)
    assert main(["--quick", "--out", str(tmp_path), "--sizes", *map(str, sizes), "--tokens", "256"]) == 0
    with open(tmp_path / "scaling.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["case"], int(r["n"])) for r in rows} == {(case_name(*c), n) for c in CASES for n in sizes}
    assert len(rows) == len(CASES) * len(sizes)
    assert all(not r["skipped"] for r in rows)
    assert all(float(r["ms"]) > 0 and int(r["edges"]) > 0 for r in rows)
    assert all(int(r["tokens"]) == 256 and int(r["batch"]) == 256 // int(r["n"]) for r in rows)
    for r in rows:
        n, per_sequence = int(r["n"]), int(r["edges"]) / int(r["batch"])
        if "/complete " in r["case"]:  # sparse, dense and dense through a mask
            assert per_sequence == n * n  # every pair, self loops included
        if "/bpt " in r["case"]:
            assert per_sequence < n * n
    table = (tmp_path / "scaling.md").read_text()
    assert "| case | time exponent | memory exponent |" in table
    assert "| transformer/bpt (sparse) |" in table and "**Edges per token**" in table
    assert "check (a)" in table and "check (b)" in table
    assert sum(line.startswith("- check") and ("PASS" in line or "FAIL" in line) for line in table.splitlines()) == 3
    assert (tmp_path / "scaling.png").stat().st_size > 1000


def test_dense_complete_batch_without_edges_computes_the_same():
    """The dense complete case builds its batch with no edge list; the model must not notice."""
    import dgl
    import torch

    from bench.scaling import VOCAB, heap_heads, make_batch, model_config
    from data.graphs import GraphConstruction
    from models.encoder import build_model

    g, labels, construction = make_batch("complete", "dense", 12, 3, k=4, window=2, seed=0)
    full = dgl.batch([GraphConstruction("complete")([0] * 12, heap_heads(12)) for _ in range(3)])
    full.ndata["tok"] = g.ndata["tok"]
    cfg = model_config("transformer")
    cfg["impl"] = "dense"
    torch.manual_seed(0)
    model = build_model(cfg, VOCAB, 10, construction).eval()
    assert torch.allclose(model(g), model(full), atol=1e-5)
