"""The attention-syntax analysis chooses its best head on one split and reports it on another."""

import pytest

from studies import attention_syntax
from tools import experiment


def _scores(parent, mass, split, acc=0.5):
    return {
        "split": split,
        "examples": 10,
        "accuracy": acc,
        "parent_acc": parent,
        "child_acc": parent,
        "mass_on_tree": mass,
        "best_parent_head": {"layer": 0, "head": 0, "acc": -1.0},  # overwritten by the choice
        "best_mass_head": {"layer": 0, "head": 0, "mass": -1.0},
    }


def test_the_head_is_chosen_on_validation_and_scored_on_test():
    # validation prefers layer 2 head 1; test would prefer layer 1 head 2: the choice follows validation
    val = _scores([[0.20, 0.10], [0.30, 0.05]], [[0.1, 0.4], [0.2, 0.1]], "val")
    test = _scores([[0.22, 0.40], [0.25, 0.06]], [[0.5, 0.1], [0.2, 0.1]], "test")
    r = attention_syntax.choose_on(val, test, "val")
    assert r["chosen_on"] == "val" and r["split"] == "test"
    assert r["best_parent_head"] == {"layer": 2, "head": 1, "acc": 0.25, "val_acc": 0.30}
    assert r["best_mass_head"] == {"layer": 1, "head": 2, "mass": 0.1, "val_mass": 0.4}
    assert r["best_on_report_split"]["best_parent_head"]["acc"] == -1.0  # the reported file's own, kept apart
    assert r["chosen_split_scores"]["parent_acc"] == val["parent_acc"]
    assert r["parent_acc"] == test["parent_acc"]  # every head's reported score is the test one


def test_neural_syntax_analyses_every_seed_choosing_on_validation(monkeypatch):
    calls = []
    monkeypatch.setattr(experiment.subprocess, "call", lambda cmd, cwd=None: calls.append(cmd[1:]) or 0)
    monkeypatch.setattr(experiment, "any_here", lambda name: True)  # its runs on this machine
    assert experiment.main(["neural_syntax", "scale=small", "--table-only"]) == 0
    thens = [c for c in calls if c[:2] == ["-m", "studies.attention_syntax"]]
    assert [c[2].rsplit("seed=", 1)[1] for c in thens] == ["0", "1", "2"]
    for call in thens:
        assert call[call.index("--choose-on") + 1] == "val" and call[call.index("--split") + 1] == "test"
    assert [c[c.index("--out") + 1] for c in thens] == [
        "docs/results/small/neural_syntax",
        "docs/results/small/neural_syntax/seed1",
        "docs/results/small/neural_syntax/seed2",
    ]


def test_the_command_line_defaults_to_choosing_on_validation(monkeypatch):
    seen = []

    def analyse(run, split, max_examples=None, tree="dep", offsets=None):
        seen.append(split)
        raise ValueError("stop after recording the split")

    monkeypatch.setattr(attention_syntax.Run, "load", staticmethod(lambda path: object()))
    monkeypatch.setattr(attention_syntax, "analyse", analyse)
    assert attention_syntax.main(["some_run"]) == 2
    assert seen == ["val"]  # the choice split first (its best heads and offsets); the reported split next
    seen.clear()
    offsets = []

    def analyse_both(run, split, *a, offsets_seen=offsets, **k):
        seen.append(split)
        offsets_seen.append(k.get("offsets"))
        return {"x": 1, "offset_baselines": {"parent": {"offset": -1, "acc": 0.2}, "child": {"offset": 1, "acc": 1.0}}}

    monkeypatch.setattr(attention_syntax, "analyse", analyse_both)
    monkeypatch.setattr(
        attention_syntax, "choose_on", lambda chosen, reported, split: (_ for _ in ()).throw(ValueError(split))
    )
    assert attention_syntax.main(["some_run"]) == 2
    assert seen == ["val", "test"]
    assert offsets == [None, {"parent": -1, "child": 1}]  # test scores the offsets validation chose


def test_experiment_then_must_be_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "read", lambda name: {"experiment_then": [1, 2]})
    with pytest.raises(SystemExit, match="experiment_then must be a line or a list of lines"):
        experiment.thens_of("x")
