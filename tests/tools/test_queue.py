"""tools.queue: several experiments' missing runs, one run a part, shard by shard, and never an endless loop."""

from __future__ import annotations

import pytest

from tools import experiment, queue, records

PLAN = [["experiment=e", f"seed={s}", "trainer.resume=auto"] for s in range(4)]


@pytest.fixture
def fake(monkeypatch):
    """A plan of 4 runs; records held in a list the fake part appends to; every part's command line kept."""
    state = {"records": [], "calls": []}
    monkeypatch.setattr(experiment, "read", lambda name: {})
    monkeypatch.setattr(experiment, "planned", lambda name, overrides: PLAN)
    monkeypatch.setattr(records, "read", lambda name: list(state["records"]))

    def part(cmd, cwd=None):
        state["calls"].append(cmd)
        shard = experiment.shard_of(cmd[cmd.index("--shard") + 1]) if "--shard" in cmd else (1, 1)
        only = [experiment.only_of(c.split("=", 1)[1]) for c in cmd if c.startswith("--only=")]
        todo = queue.left_of("e", shard, redo_unpredicted="--redo-unpredicted" in cmd, only=only)
        if todo and state.get("works", True):
            run = todo[0]
            state["records"] = [r for r in state["records"] if r["overrides"] != records.key_of(run)]
            state["records"].append({"overrides": records.key_of(run), "test_predictions": {"n": 1}})
        return 0

    monkeypatch.setattr(queue.subprocess, "call", part)
    monkeypatch.setattr(queue.share, "fill", lambda name, sources: state.get("shared", []))
    monkeypatch.setattr(queue.share, "recorded", lambda: ["e", "other"])
    monkeypatch.setattr(queue.share, "redraw", lambda name: state.setdefault("redrawn", []).append(name) or 0)
    return state


def test_a_shard_trains_its_runs_one_a_part(fake):
    assert queue.main(["e", "--shard", "2/2"]) == 0
    assert [r["overrides"][1] for r in fake["records"]] == ["seed=1", "seed=3"]  # the 2nd of every 2
    assert len(fake["calls"]) == 2 and all("--max-runs" in c and "1" in c for c in fake["calls"])


def test_redo_unpredicted_retrains_only_records_without_predictions(fake):
    fake["records"] = [
        {"overrides": records.key_of(PLAN[0])},  # recorded before predictions were kept
        {"overrides": records.key_of(PLAN[1]), "test_predictions": {"n": 1}},
    ]
    assert [run[1] for run in queue.left_of("e", (1, 1))] == ["seed=2", "seed=3"]
    assert [run[1] for run in queue.left_of("e", (1, 1), redo_unpredicted=True)] == ["seed=0", "seed=2", "seed=3"]
    assert queue.main(["e", "--redo-unpredicted"]) == 0
    assert all(r.get("test_predictions") for r in fake["records"]) and len(fake["records"]) == 4
    assert all("--redo-unpredicted" in c for c in fake["calls"])


def test_a_part_that_records_nothing_does_not_loop(fake, capsys):
    fake["works"] = False
    assert queue.main(["e"]) == 0
    assert len(fake["calls"]) == 1
    assert "recorded nothing" in capsys.readouterr().out


def test_a_run_another_experiment_recorded_is_copied_not_trained(fake, monkeypatch, capsys):
    copy = {"overrides": records.key_of(PLAN[2]), "test_predictions": {"n": 1}, "shared_from": "other: seed=2"}

    def fill(name, sources):
        assert name == "e" and sources == ["e", "other"]
        fake["records"].append(copy)
        return [copy]

    monkeypatch.setattr(queue.share, "fill", fill)
    assert queue.main(["e"]) == 0
    assert len(fake["calls"]) == 3  # seeds 0, 1 and 3: seed 2 came from the other experiment
    assert "seed=2 <- other: seed=2 (tools.share)" in capsys.readouterr().out
    assert fake["redrawn"] == ["e"]  # the table drawn again with the copy in it
    fake["calls"].clear()
    monkeypatch.setattr(queue.share, "fill", lambda name, sources: pytest.fail("--no-share copies nothing"))
    fake["records"] = []
    assert queue.main(["e", "--no-share"]) == 0 and len(fake["calls"]) == 4


def test_status_counts_records_predictions_and_copies_and_trains_nothing(fake, capsys):
    fake["records"] = [
        {"overrides": records.key_of(PLAN[0])},
        {"overrides": records.key_of(PLAN[1]), "test_predictions": {"n": 1}},
        {"overrides": records.key_of(PLAN[2]), "test_predictions": {"n": 1}, "shared_from": "other: seed=2"},
        {"overrides": ["experiment=e", "seed=9"], "test_predictions": {"n": 1}},  # not in the plan: not counted
    ]
    assert queue.main(["e", "--status"]) == 0
    assert capsys.readouterr().out.strip() == (
        "e: 3 of 4 runs recorded, 2 with predictions, 1 copied from other experiments; "
        "1 to train, 1 more with --redo-unpredicted"
    )
    assert fake["calls"] == []


def test_a_share_that_fails_is_said_in_one_line_and_every_run_is_trained(fake, monkeypatch, capsys):
    def broken(name, sources):
        raise ValueError("docs/results/runs/other.jsonl line 3: not JSON")

    monkeypatch.setattr(queue.share, "fill", broken)
    assert queue.main(["e"]) == 0
    out = capsys.readouterr().out
    assert (
        "[queue] e: tools.share failed (ValueError: docs/results/runs/other.jsonl line 3: not JSON); training every run"
        in out
    )
    assert len(fake["calls"]) == 4


def test_only_trains_the_selected_runs_cut_before_the_shards_and_refuses_a_selection_that_matches_nothing(
    fake, monkeypatch, capsys
):
    plan = [["experiment=e", f"model={m}", f"seed={s}", "trainer.resume=auto"] for m in ("a", "b") for s in range(3)]
    monkeypatch.setattr(experiment, "planned", lambda name, overrides: plan)
    assert queue.main(["e", "--only", "e:model=b", "--shard", "1/2"]) == 0
    assert [r["overrides"][1:] for r in fake["records"]] == [["model=b", "seed=0"], ["model=b", "seed=2"]]
    assert len(fake["calls"]) == 2 and all("--only=model=b" in c for c in fake["calls"])
    with pytest.raises(SystemExit) as stop:  # a second experiment's bad selection stops the queue before the first
        queue.main(["e", "g", "--only", "g:model=c"])
    assert "--only model=c: no run of g takes that value; its model values: a, b" in str(stop.value)
    with pytest.raises(SystemExit) as stop:
        queue.main(["e", "--only", "e:model=a", "--only", "e:seed=7"])
    assert "--only seed=7: no run of e takes that value" in str(stop.value)
    for bad, says in (
        (["e", "--only", "f:model=a"], "--only f:model=...: f is not among the experiments to train (e)"),
        (["e", "--only", "model=a"], "'model=a' names no experiment; write e.g. --only aggregation:graph=tree"),
    ):
        with pytest.raises(SystemExit):
            queue.main(bad)
        assert says in capsys.readouterr().err
    assert len(fake["calls"]) == 2  # nothing trained after a refused selection
