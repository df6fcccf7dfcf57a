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
