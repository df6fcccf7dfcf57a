"""bench/pretrained.py runs and writes what `make bench` promises (tiny sizes: it checks, not measures)."""

import csv

from bench.pretrained import disagreements, graph_names, main


def test_quick_pretrained_bench_writes_both_tables_and_its_check_holds(tmp_path):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    with open(tmp_path / "pretrained.csv") as f:
        rows = list(csv.DictReader(f))
    impls = [r for r in rows if r["table"] == "implementations"]
    graphs = [r for r in rows if r["table"] == "graphs"]
    assert [r["impl"] for r in impls] == ["dgl sparse", "dense twin", "hf BertModel"]
    assert float(impls[-1]["vs_hf"]) == 1.0 and float(impls[-1]["max_abs_diff"]) == 0.0  # HF against itself
    assert {(r["graph"], r["impl"]) for r in graphs} == {(g, i) for g in graph_names() for i in ("sparse", "dense")}
    # the bench's own check: DGL sparse, the dense twin and HF compute the same embeddings
    assert all(float(r["max_abs_diff"]) <= 1e-4 for r in rows)
    assert disagreements(rows, 1e-4) == [] and disagreements(rows, 0.0)  # nonzero float noise: tol 0 must trip
    for r in graphs:
        if r["graph"] == "complete":
            assert float(r["vs_complete_same_impl"]) == 1.0
        if r["graph"] == "none":  # each piece hears its word, [CLS] and [SEP]: fewer edges than complete
            complete = next(c for c in graphs if c["graph"] == "complete" and c["impl"] == r["impl"])
            assert float(r["edges_per_node"]) < float(complete["edges_per_node"])
    table = (tmp_path / "pretrained.md").read_text()
    assert "| dgl sparse | 8 |" in table and "| 8 | bpt |" in table and "vs HF" in table
