"""studies/essay: the essay's comparisons scored against their noise, and the committed answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from studies import essay
from tools import stats

ROOT = Path(__file__).resolve().parents[2]


def test_rows_are_judged_by_the_one_rule():
    """A row's verdict is tools.stats.compare's on its cells: each cell's own seeds and the test examples."""
    a, b = stats.Cell([0.60, 0.61, 0.62], n=10_000), stats.Cell([0.50, 0.51, 0.52], n=10_000)
    v = essay.judged(a, b)
    assert v == stats.compare(a, b).as_dict()
    assert v["diff"] == pytest.approx(0.10) and v["verdict"] == "A higher" and v["rule"] == "unpaired"
    assert essay.judged(stats.Cell([0.50], n=10_000), stats.Cell([0.51], n=10_000))["verdict"] == stats.NOT_JUDGED
    assert essay.judged(stats.Cell([]), stats.Cell([0.6], n=10))["verdict"] == "not run yet"


def _run(root: Path, exp: str, overrides: list[str], acc: float, test_n: int = 10000):
    d = root / exp / ",".join(sorted(overrides))
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"experiment={exp}", *overrides]))
    settings = dict(o.split("=", 1) for o in overrides)
    results = {
        "model": settings.get("model", "transformer"),
        "graph": settings.get("graph", "complete"),
        "test_acc": acc,
        "train_seconds": 1800.0 + acc,  # distinct runs have distinct timings
        "num_examples": {"train": 90000, "val": 1000, "test": test_n},
    }
    (d / "results.json").write_text(json.dumps(results))


def test_answers_from_runs_on_disk(tmp_path, monkeypatch):
    multirun = tmp_path / "multirun"
    for seed, (tree, complete) in enumerate([(0.66, 0.57), (0.67, 0.58), (0.68, 0.59)]):
        _run(multirun, "graph_choice", ["model=transformer", "graph=tree", f"seed={seed}"], tree)
        _run(multirun, "graph_choice", ["model=transformer", "graph=complete", f"seed={seed}"], complete)
    _run(multirun, "heads", ["model.num_heads=1", "seed=0"], 0.575)
    _run(multirun, "heads", ["model.num_heads=4", "seed=0"], 0.581)
    monkeypatch.setattr(essay, "ROOT", tmp_path)
    result = essay.answers()
    rows = {(r["experiment"], r["compared"]): r for r in result["comparisons"]}
    tree = rows[("graph_choice", "transformer: tree - complete")]
    assert tree["a_acc"] == [0.66, 0.67, 0.68] and tree["diff"] == pytest.approx(0.09)
    assert tree["verdict"] == "A higher" and tree["rule"] == "unpaired"  # run directories without predictions
    assert result["test_examples"] == 10000
    heads = rows[("heads", "1 - 4 heads")]
    assert heads["verdict"] == stats.NOT_JUDGED  # one seed a side
    assert rows[("aggregation", "tree: attention - max")]["verdict"] == "not run yet"
    assert result["compute"]["graph_choice"]["runs"] == 6
    assert result["compute"]["graph_choice"]["train_hours"] == pytest.approx(3.0, abs=0.01)
    # the command writes the table and the json next to it
    assert essay.main(["--table-only"]) == 0
    text = (tmp_path / "docs" / "results" / "essay.md").read_text()
    assert "| graph_choice | transformer: tree - complete | 0.670 ± 0.010 (n=3) | 0.580 ± 0.010 (n=3) | +9.0 |" in text
    assert "| unpaired | **A higher** |" in text
    assert "| **all** (a run directory copied into several experiments counts once) | 8 | 4.00 |" in text


def test_unknown_experiment_is_refused():
    with pytest.raises(SystemExit, match="not an essay experiment: nope; valid: graph_choice"):
        essay.main(["--only", "nope", "--table-only"])


@pytest.mark.parametrize("suite", ["", "small/"])
def test_committed_answers_follow_from_their_own_accuracies(suite):
    """Every unpaired verdict in docs/results/[small/]essay.json recomputes from the per-seed accuracies it
    stores and its test split's size, by tools.stats.compare (a paired one needs the records' predictions:
    the next test rescores those)."""
    path = ROOT / "docs" / "results" / suite / "essay.json"
    if not path.is_file():
        pytest.skip(f"{path} not committed")
    result = json.loads(path.read_text())
    n = result["test_examples"]
    for row in result["comparisons"]:
        if row.get("rule") == "paired":
            continue
        again = stats.compare(stats.Cell(row["a_acc"], n=n), stats.Cell(row["b_acc"], n=n)).as_dict()
        assert again["verdict"] == row["verdict"], row["compared"]
        if row["noise"] is not None:
            assert again["diff"] == pytest.approx(row["diff"]) and again["noise"] == pytest.approx(row["noise"])


def test_small_suite_rescored_from_its_committed_records_gives_the_committed_answers():
    """docs/results/small/essay.json: its per-run records (docs/results/runs/small/) give the same cells, test
    split and verdicts, with no run directory here."""
    committed = json.loads((ROOT / "docs" / "results" / "small" / "essay.json").read_text())
    assert not (ROOT / "multirun" / "small").exists() or pytest.skip("run directories here: not the records")
    again = essay.answers("small/")
    assert set(again["sources"].values()) == {"records"}
    assert again["test_examples"] == committed["test_examples"] == 1000
    assert len(again["comparisons"]) == len(committed["comparisons"]) > 40
    for new, old in zip(again["comparisons"], committed["comparisons"]):
        assert (new["experiment"], new["compared"]) == (old["experiment"], old["compared"])
        assert new["a_acc"] == old["a_acc"] and new["b_acc"] == old["b_acc"], new["compared"]
        assert (new["verdict"], new["rule"]) == (old["verdict"], old["rule"]), new["compared"]
    assert {n: c["runs"] for n, c in again["compute"].items()} == {
        n: c["runs"] for n, c in committed["compute"].items()
    }


def _record(root: Path, exp: str, overrides: list[str], acc: float, seconds: float) -> None:
    path = root / "docs" / "results" / "runs" / f"{exp}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = dict(o.split("=", 1) for o in overrides)
    line = {
        "overrides": sorted([f"experiment={exp}", *overrides]),
        "model": settings.get("model", "transformer"),
        "graph": settings.get("graph", "complete"),
        "test_acc": acc,
        "train_seconds": seconds,
        "test_by_depth": {"1": {"acc": acc, "n": 4000}, "2": {"acc": acc, "n": 6000}},
    }
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")


def test_records_score_an_experiment_and_the_rest_is_carried(tmp_path, monkeypatch):
    """No run directories: heads is scored from its records; graph_choice, neither on disk nor recorded, keeps
    the rows of the essay.json before, judged again by the unpaired rule on the suite's test size; neural_syntax
    (runs, no comparison) keeps its compute."""
    for seed, (one, four) in enumerate([(0.56, 0.60), (0.57, 0.61), (0.58, 0.62)]):
        _record(tmp_path, "heads", ["model.num_heads=1", f"seed={seed}"], one, 100.0 + seed)
        _record(tmp_path, "heads", ["model.num_heads=4", f"seed={seed}"], four, 200.0 + seed)
    previous = {
        "test_examples": 10000,
        "compute": {
            "graph_choice": {"runs": 2, "train_hours": 1.0},
            "neural_syntax": {"runs": 3, "train_hours": 0.5},
        },
        "comparisons": [
            {
                "experiment": "graph_choice",
                "compared": "gcn: complete - window",
                "a": {},
                "b": {},
                "a_acc": [0.50, 0.51],
                "b_acc": [0.52, 0.53],
                "diff": -0.02,
                "noise": 0.012,
                "verdict": "B higher",  # judged before by a laxer rule
            }
        ],
    }
    _run(tmp_path / "multirun", "heads", ["model.num_heads=1", "seed=0"], 0.50)  # a part trained here: fewer runs
    monkeypatch.setattr(essay, "ROOT", tmp_path)
    result = essay.answers("", previous)
    assert previous["comparisons"][0]["verdict"] == "B higher"  # the essay.json before is not changed
    assert result["sources"]["heads"] == "records" and result["sources"]["graph_choice"] == "carried"
    assert result["sources"]["neural_syntax"] == "carried" and result["sources"]["aggregation"] == "none"
    rows = {(r["experiment"], r["compared"]): r for r in result["comparisons"]}
    heads = rows[("heads", "1 - 4 heads")]
    assert heads["a_acc"] == [0.56, 0.57, 0.58] and heads["diff"] == pytest.approx(-0.04)
    carried = rows[("graph_choice", "gcn: complete - window")]
    # 2 points against t(0.975, ~2) x sqrt(0.00005 + 0.00005 + 2 x 0.25 / 10000): no finding any more
    assert carried["a_acc"] == [0.50, 0.51] and carried["verdict"] == "no difference measurable here"
    assert carried["rule"] == "unpaired" and carried["noise"] > 0.02
    assert ("graph_choice", "gat: tree - complete") not in rows  # only the rows it had
    assert result["compute"]["graph_choice"] == {"runs": 2, "train_hours": 1.0}
    assert result["compute"]["heads"]["runs"] == 6
    assert result["unique_runs"]["runs"] == 6 + 2 + 3
    text = essay.report(result, "python -m studies.essay --table-only")
    stored = json.loads(json.dumps(result, sort_keys=True))  # as essay.json keeps it: keys sorted
    assert essay.table_from_json(stored) == essay.report(result, "make essay")  # what check_docs replays
    assert "- carried from the essay.json before" in text and ": graph_choice, neural_syntax" in text


def test_a_carried_experiment_whose_records_come_in_part_by_part(tmp_path, monkeypatch):
    """graph_choice was carried; its records now hold the Transformer's tree and complete cells but no GCN run:
    the Transformer's row is scored from the records, GCN's keeps its carried accuracies (marked), and the 2
    earlier runs stay in the compute until the records hold both of GCN's cells."""

    def row(compared, a_acc, b_acc):
        return {"experiment": "graph_choice", "compared": compared, "a": {}, "b": {}, "a_acc": a_acc, "b_acc": b_acc}

    previous = {
        "test_examples": 10000,
        "sources": {"graph_choice": "carried"},
        "compute": {"graph_choice": {"runs": 2, "train_hours": 1.0}},
        "comparisons": [
            row("transformer: tree - complete", [0.60, 0.61, 0.62], [0.50, 0.51, 0.52]),
            row("gcn: complete - window", [0.50, 0.51], [0.52, 0.53]),
        ],
    }
    for seed in range(3):
        _record(tmp_path, "graph_choice", ["model=transformer", "graph=tree", f"seed={seed}"], 0.67, 100.0 + seed)
        _record(tmp_path, "graph_choice", ["model=transformer", "graph=complete", f"seed={seed}"], 0.57, 200.0 + seed)
    monkeypatch.setattr(essay, "ROOT", tmp_path)
    result = json.loads(json.dumps(essay.answers("", previous), sort_keys=True))  # as essay.json keeps it
    rows = {r["compared"]: r for r in result["comparisons"] if r["experiment"] == "graph_choice"}
    tree = rows["transformer: tree - complete"]
    assert tree["a_acc"] == [0.67] * 3 and "carried" not in tree
    gcn = rows["gcn: complete - window"]
    assert gcn["a_acc"] == [0.50, 0.51] and gcn["carried"] is True and gcn["rule"] == "unpaired"
    assert [c for c, r in rows.items() if r.get("carried")] == ["gcn: complete - window"]
    assert rows["gat: complete - knn"]["a_acc"] == rows["gat: complete - knn"]["b_acc"] == []  # not run yet
    assert result["sources"]["graph_choice"] == essay.PARTLY
    assert result["carried_compute"] == {"graph_choice": {"runs": 2, "train_hours": 1.0}}
    assert result["compute"]["graph_choice"] == {"runs": 8, "train_hours": pytest.approx(1.0 + 906 / 3600)}
    assert result["unique_runs"]["runs"] == 6 + 2
    text = essay.table_from_json(result)
    assert "| gcn: complete - window | 0.505 ± 0.007 (n=2) | 0.525 ± 0.007 (n=2) | -2.0 |" in text
    assert "| unpaired, carried | no difference measurable here |" in text
    assert "rows marked `carried` keep" in text and ": graph_choice" in text

    # a part later (the essay.json before is now partly carried): one GCN cell is in, the row stays carried
    _record(tmp_path, "graph_choice", ["model=gcn", "graph=complete", "seed=0"], 0.55, 50.0)
    again = json.loads(json.dumps(essay.answers("", result), sort_keys=True))
    gcn = next(r for r in again["comparisons"] if r["compared"] == "gcn: complete - window")
    assert gcn["carried"] is True and again["carried_compute"] == result["carried_compute"]
    assert again["compute"]["graph_choice"]["runs"] == 9
    # both GCN cells in: nothing is carried, the earlier runs leave the compute
    _record(tmp_path, "graph_choice", ["model=gcn", "graph=window", "seed=0"], 0.54, 50.0)
    done = json.loads(json.dumps(essay.answers("", again), sort_keys=True))
    gcn = next(r for r in done["comparisons"] if r["compared"] == "gcn: complete - window")
    assert "carried" not in gcn and gcn["a_acc"] == [0.55] and gcn["b_acc"] == [0.54]
    assert done["sources"]["graph_choice"] == "records" and "carried_compute" not in done
    assert done["compute"]["graph_choice"]["runs"] == 8


def test_records_with_predictions_are_judged_paired(tmp_path, monkeypatch):
    """Records that kept their per-example test predictions on one split are compared example by example: the
    row says ``paired`` and its verdict is compare's on the decoded predictions; a record without them sends
    its rows back to the unpaired rule."""
    import numpy as np

    from engine.predictions import encode_correct

    rng = np.random.default_rng(0)
    labels = np.zeros(2000, dtype=int)
    easy = rng.random(2000)
    for seed in range(3):
        for heads, p in (("1", 0.55), ("4", 0.60)):
            right = easy < p + rng.normal(0, 0.005)
            _record(tmp_path, "heads", [f"model.num_heads={heads}", f"seed={seed}"], right.mean(), 100.0)
            path = tmp_path / "docs" / "results" / "runs" / "heads.jsonl"
            lines = path.read_text().splitlines()
            last = json.loads(lines[-1])
            last["test_predictions"] = encode_correct(np.where(right, 0, 1), labels, "split")
            path.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    monkeypatch.setattr(essay, "ROOT", tmp_path)
    row = {(r["experiment"], r["compared"]): r for r in essay.answers()["comparisons"]}[("heads", "1 - 4 heads")]
    runs = [json.loads(line) for line in (tmp_path / "docs/results/runs/heads.jsonl").read_text().splitlines()]
    one = stats.cell_of([r for r in runs if "model.num_heads=1" in r["overrides"]])
    four = stats.cell_of([r for r in runs if "model.num_heads=4" in r["overrides"]])
    assert one.correct.shape == (3, 2000)
    assert row["rule"] == "paired" and row == {**row, **stats.compare(one, four).as_dict()}
    assert row["verdict"] == "B higher"  # 5 points on the same easy examples
