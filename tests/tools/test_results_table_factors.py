"""tools/results_table.py on sweeps whose factors are not model x graph."""

import json
from pathlib import Path

import yaml

from tools import results_table


# --------------------------------------------------------------------------------------------
# tools/results_table.py on sweeps whose factors are not model x graph
# --------------------------------------------------------------------------------------------
def fake_run(root: Path, name: str, overrides: list[str], acc: float, graph="complete"):
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["experiment=heads", *overrides]))
    (d / "results.json").write_text(
        json.dumps(
            {
                "model": "transformer",
                "graph": graph,
                "test_acc": acc,
                "best_val_acc": acc,
                "train_seconds": 1.0,
                "examples_per_second": 10.0,
                "epochs": 2,
                "device": "cpu",
                "test_by_depth": {"1": {"n": 3, "acc": acc}},
            }
        )
    )
    (d / "metrics.csv").write_text("epoch,train_loss,val_acc\n1,2.0,0.3\n2,1.5,0.4\n")


def test_results_table_by_length_table_and_plot(tmp_path):
    for i, (graph, acc) in enumerate([("tree", 0.5), ("complete", 0.4)]):
        fake_run(tmp_path, str(i), [f"graph={graph}"], acc, graph=graph)
        path = tmp_path / str(i) / "results.json"
        r = json.loads(path.read_text())
        r["test_by_length"] = {"1-10": {"n": 30, "acc": acc}, "11-20": {"n": 12, "acc": acc - 0.1}}
        path.write_text(json.dumps(r))
    args = [str(tmp_path), "--out", str(tmp_path / "t.md"), "--lengths", str(tmp_path / "len.png")]
    assert results_table.main(args) == 0
    text = (tmp_path / "t.md").read_text()
    assert "| graph | 1-10 (n=30) | 11-20 (n=12) |" in text
    assert "| tree | 0.500 | 0.400 |" in text and "| complete | 0.400 | 0.300 |" in text
    assert (tmp_path / "len.png").stat().st_size > 1000


def test_results_table_rows_are_the_sweep_factors(tmp_path, capsys):
    fake_run(tmp_path, "0", ["model.num_heads=8"], 0.5)
    fake_run(tmp_path, "1", ["model.num_heads=1"], 0.4)
    fake_run(tmp_path, "2", ["model.num_heads=1", "seed=1"], 0.6)
    args = [str(tmp_path), "--out", str(tmp_path / "t.md"), "--curves", str(tmp_path / "c.png")]
    assert results_table.main(args + ["--plot", str(tmp_path / "d.png")]) == 0
    text = (tmp_path / "t.md").read_text()
    assert "| model.num_heads | test accuracy |" in text
    assert text.index("| 1 | 0.500 ± 0.141 (n=2) |") < text.index("| 8 | 0.500 |")  # numeric order, seeds averaged
    assert (tmp_path / "c.png").stat().st_size > 5000 and (tmp_path / "d.png").stat().st_size > 5000


def test_results_table_graph_columns_other_factors_rows(tmp_path):
    for i, (pe, graph, acc) in enumerate([("none", "tree", 0.5), ("lap_pe", "tree", 0.6), ("none", "complete", 0.4)]):
        fake_run(tmp_path, str(i), [f"model.positional={pe}", f"graph={graph}"], acc, graph=graph)
    assert results_table.main([str(tmp_path), "--out", str(tmp_path / "t.md")]) == 0
    text = (tmp_path / "t.md").read_text()
    assert "| model.positional \\ graph | complete | tree |" in text
    assert "| none | 0.400 | 0.500 |" in text and "| lap_pe | – | 0.600 |" in text
