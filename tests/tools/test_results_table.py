"""tools/results_table.py turns results.json files into the tables of docs/results/."""

import json

import pytest

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


def test_fewer_run_directories_keep_the_committed_table(tmp_path):
    """Drawing a table from run directories over one whose first line states more runs (a checkout without some
    of them) would write it over with fewer: it stops with one line naming the fix and leaves the table as it
    was. A table without that line (make report) is drawn again as before."""
    runs = tmp_path / "runs"
    for name, acc in (("a", 0.75), ("b", 0.5), ("c", 0.7)):
        write_run(runs, name, "transformer", "complete", acc)
    table = tmp_path / "heads.md"
    assert main([str(runs), "--out", str(table), "--command", "make experiment E=heads"]) == 0
    before = table.read_bytes()
    assert "(3 runs, " in before.decode().splitlines()[0]
    for name in ("a", "b"):
        (runs / name / "results.json").unlink()
    with pytest.raises(SystemExit, match=r"holds 1 runs, .*heads.md 3: .*E=heads ARGS='--table-only'"):
        main([str(runs), "--out", str(table), "--command", "make experiment E=heads"])
    assert table.read_bytes() == before
    report = tmp_path / "results.md"  # no '(N runs' line: nothing to keep
    write_run(runs, "d", "gat", "tree", 0.75)
    assert main([str(runs), "--out", str(report)]) == 0
    (runs / "d" / "results.json").unlink()
    assert main([str(runs), "--out", str(report)]) == 0


def write_curve(root, name, model, graph, seed, losses, accs):
    """A run with a ``metrics.csv`` and the overrides that name its cell."""
    write_run(root, name, model, graph, accs[-1])
    (root / name / ".hydra").mkdir()
    (root / name / ".hydra" / "overrides.yaml").write_text(f"- model={model}\n- graph={graph}\n- seed={seed}\n")
    rows = "".join(f"{e},{loss},{a}\n" for e, (loss, a) in enumerate(zip(losses, accs), start=1))
    (root / name / "metrics.csv").write_text("epoch,train_loss,val_acc\n" + rows)


def test_curves_average_seeds_one_line_per_graph_in_each_models_panel(tmp_path):
    """A grid of 2 models x 2 graphs x 2 seeds draws 4 lines (not 8), each the per-epoch mean of its seeds;
    a seed that stopped early leaves the later epochs to the other seed."""
    from tools.results_table import collect, curve_groups, plot_curves

    write_curve(tmp_path, "0", "gat", "dep", 0, [2.0, 1.0, 0.5], [0.2, 0.4, 0.6])
    write_curve(tmp_path, "1", "gat", "dep", 1, [1.0, 0.0], [0.4, 0.6])
    write_curve(tmp_path, "2", "gat", "none", 0, [3.0, 2.0], [0.1, 0.2])
    write_curve(tmp_path, "3", "gcn", "dep", 0, [1.0, 1.0], [0.5, 0.5])
    write_curve(tmp_path, "4", "gcn", "none", 0, [1.0, 1.0], [0.3, 0.3])
    write_curve(tmp_path, "5", "gcn", "none", 1, [3.0, 3.0], [0.5, 0.7])
    groups = curve_groups(collect(tmp_path))
    assert list(groups) == [("gcn", "dep"), ("gcn", "none"), ("gat", "dep"), ("gat", "none")]
    assert groups[("gat", "dep")]["train_loss"] == ([1, 2, 3], [1.5, 0.5, 0.5])
    epochs, accs = groups[("gcn", "none")]["val_acc"]
    assert epochs == [1, 2] and accs == pytest.approx([0.4, 0.5])
    out = plot_curves(collect(tmp_path), tmp_path / "c.png")
    assert out.stat().st_size > 1000


def test_rerunning_keeps_the_analysis_written_below_the_tables(tmp_path, capsys):
    """``--out`` on an existing page refreshes the tables and keeps every line from its first '## ' heading:
    a rerun experiment must not delete the prose that reads its numbers."""
    out = tmp_path / "page.md"
    write_run(tmp_path / "runs", "a", "gat", "tree", 0.75)
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    analysis = "## What was run, and the answer\n\nGAT on the tree: 0.750.\n\n## Runs\n\n- a\n"
    out.write_text(out.read_text() + "\n" + analysis)
    write_run(tmp_path / "runs", "b", "gat", "tree", 0.25)  # a second seed changes the table
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| all | 0.500 ± 0.354 (n=2) |" in text and "| all | 0.750 |" not in text
    assert text.endswith("\n\n" + analysis)
    assert text.count("## What was run") == 1
    assert "kept the written analysis" in capsys.readouterr().out
