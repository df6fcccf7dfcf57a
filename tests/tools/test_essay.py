"""studies/essay: the essay's comparisons scored against their noise, and the committed answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from studies import essay

ROOT = Path(__file__).resolve().parents[2]


def test_pooled_sd_and_the_noise_threshold():
    assert essay.pooled_sd([[1.0], [2.0]]) is None  # no cell with two seeds: nothing to pool
    # groups (1, 3) and (2, 4, 6): sum of squares 2 + 8 over 1 + 2 degrees of freedom
    assert essay.pooled_sd([[1.0, 3.0], [2.0, 4.0, 6.0]]) == pytest.approx(math.sqrt(10 / 3))
    v = essay.verdict([0.60, 0.61, 0.62], [0.50, 0.51, 0.52], sigma_suite=0.005)
    assert v["sigma"] == pytest.approx(0.01)  # the pair's own seed sd beats the suite's
    assert v["noise"] == pytest.approx(2 * 0.01 * math.sqrt(2 / 3))
    assert v["diff"] == pytest.approx(0.10) and v["verdict"] == "A higher"
    small = essay.verdict([0.50], [0.51], sigma_suite=0.01)  # 1 point against 2.8 points of noise
    assert small["verdict"] == "no difference measurable here"
    assert essay.verdict([0.4], [0.6], sigma_suite=0.01)["verdict"] == "B higher"
    assert essay.verdict([], [0.6], sigma_suite=0.01)["verdict"] == "not run yet"


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
    assert tree["verdict"] == "A higher"
    assert result["sigma_suite"] == pytest.approx(0.01)  # both cells have sd 0.01
    heads = rows[("heads", "1 - 4 heads")]
    assert heads["verdict"] == "no difference measurable here"  # 0.5 points against 2.8
    assert rows[("aggregation", "tree: attention - max")]["verdict"] == "not run yet"
    assert result["compute"]["graph_choice"]["runs"] == 6
    assert result["compute"]["graph_choice"]["train_hours"] == pytest.approx(3.0, abs=0.01)
    # the command writes the table and the json next to it
    assert essay.main(["--table-only"]) == 0
    text = (tmp_path / "docs" / "results" / "essay.md").read_text()
    assert "| graph_choice | transformer: tree - complete | 0.670 ± 0.010 (n=3) | 0.580 ± 0.010 (n=3) | +9.0 |" in text
    assert "| **all** (a run directory copied into several experiments counts once) | 8 | 4.00 |" in text


def test_unknown_experiment_is_refused():
    with pytest.raises(SystemExit, match="not an essay experiment: nope; valid: graph_choice"):
        essay.main(["--only", "nope", "--table-only"])


@pytest.mark.parametrize("suite", ["", "small/"])
def test_committed_answers_follow_from_their_own_accuracies(suite):
    """Every verdict in docs/results/[small/]essay.json recomputes from the per-seed accuracies it
    stores, with the formula in studies/essay's docstring."""
    path = ROOT / "docs" / "results" / suite / "essay.json"
    if not path.is_file():
        pytest.skip(f"{path} not committed")
    result = json.loads(path.read_text())
    for row in result["comparisons"]:
        again = essay.verdict(row["a_acc"], row["b_acc"], result["sigma_suite"])
        assert again["verdict"] == row["verdict"], row["compared"]
        if row["diff"] is not None:
            assert again["diff"] == pytest.approx(row["diff"]) and again["noise"] == pytest.approx(row["noise"])


def test_small_suite_rescored_from_its_committed_records_gives_the_committed_answers():
    """docs/results/small/essay.json was scored from run directories; its per-run records
    (docs/results/runs/small/) give the same cells, suite sigma and verdicts, with no run directory here."""
    committed = json.loads((ROOT / "docs" / "results" / "small" / "essay.json").read_text())
    assert not (ROOT / "multirun" / "small").exists() or pytest.skip("run directories here: not the records")
    again = essay.answers("small/")
    assert set(again["sources"].values()) == {"records"}
    assert again["sigma_suite"] == pytest.approx(committed["sigma_suite"])
    assert again["binomial_floor"] == pytest.approx(committed["binomial_floor"])
    assert len(again["comparisons"]) == len(committed["comparisons"]) > 40
    for new, old in zip(again["comparisons"], committed["comparisons"]):
        assert (new["experiment"], new["compared"]) == (old["experiment"], old["compared"])
        assert new["a_acc"] == old["a_acc"] and new["b_acc"] == old["b_acc"], new["compared"]
        assert new["verdict"] == old["verdict"], new["compared"]
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
    the rows of the essay.json before, its verdicts judged again under the new suite sigma; neural_syntax
    (runs, no comparison) keeps its compute."""
    for seed, (one, four) in enumerate([(0.56, 0.60), (0.57, 0.61), (0.58, 0.62)]):
        _record(tmp_path, "heads", ["model.num_heads=1", f"seed={seed}"], one, 100.0 + seed)
        _record(tmp_path, "heads", ["model.num_heads=4", f"seed={seed}"], four, 200.0 + seed)
    previous = {
        "binomial_floor": 0.005,
        "sigma_suite": 0.002,
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
                "a_acc": [0.50],
                "b_acc": [0.52],
                **essay.verdict([0.50], [0.52], 0.002),
            }
        ],
    }
    assert previous["comparisons"][0]["verdict"] == "B higher"  # 2 points against 0.6 with sigma 0.2 points
    _run(tmp_path / "multirun", "heads", ["model.num_heads=1", "seed=0"], 0.50)  # a part trained here: fewer runs
    monkeypatch.setattr(essay, "ROOT", tmp_path)
    result = essay.answers("", previous)
    assert previous["comparisons"][0]["verdict"] == "B higher"  # the essay.json before is not changed
    assert result["sources"]["heads"] == "records" and result["sources"]["graph_choice"] == "carried"
    assert result["sources"]["neural_syntax"] == "carried" and result["sources"]["aggregation"] == "none"
    assert result["sigma_suite"] == pytest.approx(0.01)  # the recorded cells' sd, not the carried 0.002
    rows = {(r["experiment"], r["compared"]): r for r in result["comparisons"]}
    heads = rows[("heads", "1 - 4 heads")]
    assert heads["a_acc"] == [0.56, 0.57, 0.58] and heads["diff"] == pytest.approx(-0.04)
    carried = rows[("graph_choice", "gcn: complete - window")]
    assert carried["a_acc"] == [0.50] and carried["verdict"] == "no difference measurable here"  # 2 vs 2.8
    assert ("graph_choice", "gat: tree - complete") not in rows  # only the rows it had
    assert result["compute"]["graph_choice"] == {"runs": 2, "train_hours": 1.0}
    assert result["compute"]["heads"]["runs"] == 6
    assert result["unique_runs"]["runs"] == 6 + 2 + 3
    text = essay.report(result, "python -m studies.essay --table-only")
    stored = json.loads(json.dumps(result, sort_keys=True))  # as essay.json keeps it: keys sorted
    assert essay.table_from_json(stored) == essay.report(result, "make essay")  # what check_docs replays
    assert "- carried from the essay.json before" in text and ": graph_choice, neural_syntax" in text
