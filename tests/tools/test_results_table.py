"""tools/results_table.py turns results.json files into the tables of docs/results/."""

import json

from tools.results_table import main


def write_run(root, name, model, graph, acc, seconds=10.0):
    d = root / name
    d.mkdir(parents=True)
    (d / "results.json").write_text(
        json.dumps(
            {
                "model": model,
                "graph": graph,
                "test_acc": acc,
                "train_seconds": seconds,
                "examples_per_second": 100.0,
                "epochs": 3,
                "device": "cpu",
                "test_by_depth": {"1": {"n": 4, "acc": acc}, "2": {"n": 2, "acc": 0.5}},
            }
        )
    )


def test_table_cells_and_seed_averages(tmp_path, capsys):
    write_run(tmp_path, "a", "gat", "tree", 0.75)
    write_run(tmp_path, "b", "transformer", "complete", 0.5)
    write_run(tmp_path, "c", "transformer", "complete", 0.7)  # a second seed of the same cell
    assert main([str(tmp_path), "--out", str(tmp_path / "t.md"), "--plot", str(tmp_path / "d.png")]) == 0
    text = (tmp_path / "t.md").read_text()
    assert "| model \\ graph | complete | tree |" in text
    assert "| gat | – | 0.750 |" in text
    assert "| transformer | 0.600 ± 0.141 (n=2) | – |" in text
    assert "3 runs, device cpu" in text
    assert (tmp_path / "d.png").stat().st_size > 1000
    assert text.strip() in capsys.readouterr().out


def test_empty_directory_is_an_error(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no results.json" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
