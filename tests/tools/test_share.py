"""tools.share: one run recorded under every experiment that plans it, and only the very same run."""

from __future__ import annotations

import csv
import json

import pytest

from tests.conftest import compose_config
from tools import records, run_config, share

TRANSFORMER_COMPLETE = [  # four experiments' names for the full-scale Transformer, complete graph, seed 0
    ["experiment=positional", "graph=complete", "model.positional=sinusoidal", "seed=0"],
    ["experiment=aggregation", "graph=complete", "model=transformer", "seed=0"],
    ["experiment=graph_choice", "graph=complete", "model=transformer", "seed=0"],
    ["experiment=heads", "model.num_heads=4", "seed=0"],
]


def same_run(a: list[str], b: list[str]) -> bool:
    """What tools.share calls one run: two overrides lists that compose to the same normalised config."""
    ca, cb = share.composed(tuple(a)), share.composed(tuple(b))
    return ca is not None and ca == cb


def test_the_essays_shared_runs_compose_to_one_config():
    first = TRANSFORMER_COMPLETE[0]
    assert all(same_run(first, other) for other in TRANSFORMER_COMPLETE[1:])
    # positional's pe_dim (16) differs from the default (8) and is unread with sinusoidal positions only
    assert share.config_of(tuple(first)) == share.config_of(tuple(TRANSFORMER_COMPLETE[1]))
    different = [
        ["experiment=aggregation", "graph=complete", "model=transformer", "seed=1"],  # another seed
        ["experiment=aggregation", "graph=tree", "model=transformer", "seed=0"],  # another graph
        ["experiment=positional", "graph=complete", "model.positional=lap_pe", "seed=0"],  # structural: reads pe_dim
        ["experiment=graph_choice_depth", "graph=complete", "model.num_layers=4", "seed=0"],  # tied weights
        ["experiment=heads", "model.num_heads=4", "seed=0", "optim.lr=0.003"],  # any other setting
        ["experiment=training", "model.norm=pre", "optim.warmup_ratio=0.0", "model.scaled=true", "seed=0"],
    ]
    for run in different:
        assert not same_run(first, run), run
    # lap_pe with another pe_dim is another run (pe_dim is read there)
    lap = ["experiment=positional", "graph=complete", "model.positional=lap_pe", "seed=0"]
    assert not same_run(lap, [*lap, "model.pe_dim=8"])
    assert not same_run(first, [*first, "model.no_such_setting=1"])  # a record that no longer composes


def train_tiny(overrides: list[str], out) -> dict:
    import train

    cfg = compose_config([*overrides, "debug=tiny", "trainer.progress=false", "logger=none"])
    train.run(cfg, out)
    return json.loads((out / "results.json").read_text())


def curve_of(path) -> list[tuple[str, ...]]:
    """Each epoch's losses and accuracies as written (strings: equal means equal to the last bit)."""
    with open(path) as f:
        return [tuple(m[k] for k in ("train_loss", "train_acc", "val_loss", "val_acc")) for m in csv.DictReader(f)]


def test_two_names_for_one_run_train_to_the_same_numbers(tmp_path):
    """What same_run calls one run trains to the same numbers, bit for bit; a setting it tells apart does not."""
    a = train_tiny(TRANSFORMER_COMPLETE[0], tmp_path / "positional")
    b = train_tiny(TRANSFORMER_COMPLETE[1], tmp_path / "aggregation")
    train_tiny(["experiment=positional", "graph=complete", "model.positional=none", "seed=0"], tmp_path / "none")
    for key in ("test_acc", "best_val_acc", "test_predictions", "num_params"):
        assert a[key] == b[key], key
    losses = [curve_of(tmp_path / d / "metrics.csv") for d in ("positional", "aggregation", "none")]
    assert losses[0] == losses[1]
    assert losses[0] != losses[2]


def record(overrides: list[str], predicted: bool, acc: float) -> dict:
    r = {"overrides": sorted(overrides), "seed": 0, "commit": "c0ffee", "test_acc": acc, "model": "transformer"}
    if predicted:
        r["test_predictions"] = {"fingerprint": "f", "n": 8, "bits": "AA=="}
    return r


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "ROOT", tmp_path)
    return tmp_path / records.RUNS


def write_lines(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_fill_copies_a_predicted_record_under_the_targets_own_overrides(runs_dir):
    pos = ["experiment=positional", "graph=complete", "model.positional=sinusoidal", "seed=0"]
    write_lines(
        runs_dir / "positional.jsonl",
        [
            record(pos, True, 0.58),
            record(["experiment=positional", "graph=tree", "model.positional=sinusoidal", "seed=0"], False, 0.67),
        ],
    )
    # aggregation holds its complete-graph seed 0 without predictions, and no tree run at all
    agg_complete = ["experiment=aggregation", "graph=complete", "model=transformer", "seed=0"]
    write_lines(runs_dir / "aggregation.jsonl", [record(agg_complete, False, 0.57)])
    assert share.fill("aggregation", ["positional"], dry_run=True)
    assert len(records.read("aggregation")) == 1  # a dry run writes nothing

    written = share.fill("aggregation", ["positional"])
    # the predicted complete-graph run replaces the unpredicted record; the unpredicted tree run is not copied
    assert [r["overrides"] for r in written] == [sorted(agg_complete)]
    (got,) = records.read("aggregation")
    assert got["overrides"] == sorted(agg_complete) and got["test_acc"] == 0.58 and got["test_predictions"]
    assert got["shared_from"] == "positional: graph=complete model.positional=sinusoidal seed=0"
    assert share.fill("aggregation", ["positional"]) == []  # nothing left to copy: the copy has predictions

    # --unpredicted: the tree run too, where aggregation has none; and a copy is never copied on
    tree = share.fill("aggregation", ["positional"], unpredicted=True)
    assert [r["overrides"] for r in tree] == [["experiment=aggregation", "graph=tree", "model=transformer", "seed=0"]]
    assert share.fill("heads", ["aggregation"]) == []


def test_a_record_with_predictions_wins_over_an_earlier_source_without(runs_dir):
    agg = ["experiment=aggregation", "graph=complete", "model=transformer", "seed=0"]
    pos = ["experiment=positional", "graph=complete", "model.positional=sinusoidal", "seed=0"]
    write_lines(runs_dir / "aggregation.jsonl", [record(agg, False, 0.57)])
    write_lines(runs_dir / "positional.jsonl", [record(pos, True, 0.58)])
    (got,) = share.fill("heads", ["aggregation", "positional"], dry_run=True, unpredicted=True)
    assert got["shared_from"].startswith("positional:") and got["test_predictions"]


def test_the_command_names_what_it_copies_and_refuses_an_unknown_experiment(runs_dir, capsys, monkeypatch):
    pos = ["experiment=positional", "graph=complete", "model.positional=sinusoidal", "seed=0"]
    write_lines(runs_dir / "positional.jsonl", [record(pos, True, 0.58)])
    assert share.main(["heads", "--from", "positional", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "heads: would copy 1 run(s)" in out and "model.num_heads=4 seed=0 <- positional: graph=complete" in out
    assert not (runs_dir / "heads.jsonl").exists()
    drawn = []
    monkeypatch.setattr(share, "redraw", lambda name: drawn.append(name) or 0)
    assert share.main(["heads", "--from", "positional"]) == 0
    assert drawn == ["heads"] and len(records.read("heads")) == 1  # written, and the table drawn from it again
    with pytest.raises(SystemExit, match="no experiment 'postional'"):
        share.main(["heads", "--from", "postional"])


def test_a_record_that_keeps_its_config_digest_is_matched_by_it(runs_dir):
    """A record gathered from its run directory is compared by the config it trained with, not by its overrides."""
    pos = ["experiment=positional", "graph=complete", "model.positional=sinusoidal", "seed=0"]
    today = share.digest(share.config_of(tuple(pos)))
    right, wrong = record(pos, True, 0.58), record(pos, True, 0.58)
    wrong["config_digest"] = "0" * 16  # trained with another config, though its overrides compose to today's run
    write_lines(runs_dir / "positional.jsonl", [wrong])
    assert share.fill("heads", ["positional"], dry_run=True) == []
    right["config_digest"] = today
    write_lines(runs_dir / "positional.jsonl", [right])
    assert len(share.fill("heads", ["positional"], dry_run=True)) == 1


def test_the_digest_of_a_run_directory_is_the_digest_of_its_composed_run(tmp_path):
    from omegaconf import OmegaConf

    pos = ["experiment=positional", "graph=complete", "model.positional=sinusoidal", "seed=0"]
    cfg = compose_config(pos)
    (tmp_path / ".hydra").mkdir()
    OmegaConf.save(cfg, tmp_path / ".hydra" / "config.yaml")
    assert run_config.digest_of_run(tmp_path) == share.digest(share.config_of(tuple(pos)))
    # a run of today's code with the switches at their defaults, and one from before they existed: the same run
    raw = OmegaConf.to_container(cfg, resolve=True)
    del raw["trainer"]["compile"], raw["trainer"]["device_batches"]
    OmegaConf.save(OmegaConf.create(raw), tmp_path / ".hydra" / "config.yaml")
    assert run_config.digest_of_run(tmp_path) == share.digest(share.config_of(tuple(pos)))
    raw["trainer"]["compile"] = True  # a switch on is another run
    OmegaConf.save(OmegaConf.create(raw), tmp_path / ".hydra" / "config.yaml")
    assert run_config.digest_of_run(tmp_path) != share.digest(share.config_of(tuple(pos)))
    assert run_config.digest_of_run(tmp_path / "nowhere") is None


def test_records_keep_the_digest_of_the_config_their_run_trained_with(tmp_path, runs_dir):
    from omegaconf import OmegaConf

    run = tmp_path / "multirun" / "positional" / "graph=complete,model.positional=sinusoidal,seed=0"
    (run / ".hydra").mkdir(parents=True)
    pos = ["experiment=positional", "graph=complete", "model.positional=sinusoidal", "seed=0"]
    OmegaConf.save(compose_config(pos), run / ".hydra" / "config.yaml")
    (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in pos))
    (run / "results.json").write_text(json.dumps({"seed": 0, "test_acc": 0.5, "model": "transformer"}))
    assert records.record_of(run, "c0ffee")["config_digest"] == share.digest(share.config_of(tuple(pos)))
