"""studies/soft_syntax: the table of ``make experiment E=soft_syntax`` from run directories and the reused
pretrained_graphs runs, and the learned-bias figure from a checkpoint."""

from __future__ import annotations

import json

import numpy as np
import torch

from engine.checkpoint import save_checkpoint
from engine.predictions import encode_correct
from studies import soft_syntax as ss
from tools.stats import Cell, compare

BIAS = ["dataset=trec", "graph=complete", "model.structure_bias=dep"]
GRIDS = """experiment_grids:
  - dataset=trec graph=complete model.structure_bias=dep model.structure_bias_lr_scale=100,1000 seed=0
  - dataset=trec graph=complete model.syntax_layers=1 seed=0,1,2
  - dataset=trec graph=complete model.structure_bias=dep model.structure_bias_lr_scale=100 seed=1,2
  - dataset=sst_binary graph=complete model.structure_bias=dep,tree model.structure_bias_lr_scale=100 seed=0
"""


def fake_run(runs, overrides, test_acc=None, val_acc=0.9, n_test=500, seconds=100.0, bias=None, predictions=None):
    """A run directory as train.py leaves it: overrides, and results.json (and best.pt) when finished, with its
    per-example test predictions when given."""
    d = runs / ",".join(overrides)
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in ["experiment=soft_syntax", *overrides]))
    if test_acc is not None:
        results = {
            "best_val_acc": val_acc,
            "best_epoch": 2,
            "test_acc": test_acc,
            "epochs": 2,
            "train_seconds": seconds,
            "num_examples": {"train": 4952, "val": 500, "test": n_test},
        }
        if predictions is not None:
            results["test_predictions"] = predictions
        (d / "results.json").write_text(json.dumps(results))
        model = {"structure_bias": bias if bias is not None else torch.zeros(6, 7, 12)}
        save_checkpoint(d / "checkpoints" / "best.pt", model=model, config={}, vocab=[], num_classes=6, epoch=2)
    return d


def reference(path, accs, predictions=None):
    """A pretrained_graphs.json with TREC-6's complete and dep cells (3 seeds each), with each run's per-example
    test predictions when ``predictions`` (graph -> one per seed) gives them."""
    cells = []
    for graph, tests in accs.items():
        runs = [
            {
                "dir": f"dataset=trec,graph={graph},seed={s}",
                "settings": {"dataset": "trec", "graph": graph, "seed": str(s)},
                "finished": True,
                "best_val_acc": 0.95,
                "best_epoch": 2,
                "test_acc": t,
                "epochs_run": 2,
                "train_seconds": 100.0,
                "n_test": 500,
                "n_train": 4952,
            }
            for s, t in enumerate(tests)
        ]
        for s, run in enumerate(runs):
            if predictions is not None:
                run["test_predictions"] = predictions[graph][s]
        cells.append({"settings": {"dataset": "trec", "graph": graph}, "seeds_planned": [0, 1, 2], "runs": runs})
    path.write_text(json.dumps({"cells": cells, "runs": [], "base_lr": "3e-05"}))
    return path


def test_table_compares_with_complete_and_hard_dep_and_says_what_is_missing(tmp_path):
    runs = tmp_path / "runs"
    bias = torch.zeros(6, 7, 12)
    bias[:, 1] = 0.5  # every head likes head/dependent pairs
    for seed, acc in enumerate((0.97, 0.968, 0.972)):
        fake_run(
            runs, [*BIAS, "model.structure_bias_lr_scale=100", f"seed={seed}"], acc, 0.95, seconds=120.0, bias=bias
        )
    fake_run(runs, [*BIAS, "model.structure_bias_lr_scale=1000", "seed=0"], 0.5, 0.96)  # better on val: not chosen
    fake_run(runs, ["dataset=trec", "graph=complete", "model.syntax_layers=1", "seed=0"])  # unfinished
    ref = reference(tmp_path / "pg.json", {"complete": (0.95, 0.952, 0.948), "dep": (0.93, 0.92, 0.94)})
    out, conf = tmp_path / "out", tmp_path / "soft_syntax.yaml"
    conf.write_text(GRIDS)  # the choice grid says 100 or 1000; the later grids use 100
    args = ["--runs", str(runs), "--reference", str(ref), "--conf", str(conf)]
    assert ss.main([*args, "--out", str(out), "--figures", str(out)]) == 0
    md = (out / "soft_syntax.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| dataset | complete"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[1:4] == ["complete", "hard dep", "dep bias"] and "tree bias" in columns
    row = dict(
        zip(
            columns,
            (
                c.strip()
                for c in next(line for line in md.splitlines() if line.startswith("| TREC-6 |")).strip("|").split("|")
            ),
        )
    )
    assert row["complete"].startswith("95.00 ± 0.20 (3 seeds")
    assert row["dep bias"].startswith("97.00 ± 0.20 (3 seeds, val 95.00)")
    assert row["tree bias"] == "–"  # TREC-6 has no gold tree: no such cell
    assert row[next(c for c in columns if c.startswith("fusion"))].startswith("not run yet")
    sst = next(line for line in md.splitlines() if line.startswith("| binary SST |"))
    assert "not run yet" in sst
    line = next(line for line in md.splitlines() if line.startswith("| TREC-6 | dep bias |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # each verdict is tools.stats.compare of the soft cell (A) and the reference (B): no run kept per-example
    # predictions, so the unpaired rule (seeds' variance over 3 seeds, plus each cell's binomial term on 500)
    soft = Cell([0.97, 0.968, 0.972], n=500)
    for at, accs in ((3, (0.95, 0.952, 0.948)), (6, (0.93, 0.92, 0.94))):
        v = compare(soft, Cell(accs, n=500))
        assert cells[at : at + 2] == [f"{100 * v.diff:+.2f}", f"{100 * v.noise:.2f}"] and v.rule == "unpaired"
    # vs complete: +2.00 inside its noise 2.45; vs hard dep: +4.00 beyond its 2.97
    assert cells[3:] == [
        "+2.00",
        "2.45",
        "no difference measurable here",
        "+4.00",
        "2.97",
        "soft cell higher",
        "unpaired",
        "1.20×",
    ]
    assert "[docs/statistics.md](../statistics.md)" in md.split("| dataset | cell | seeds |")[0]
    assert "1000 is the best on validation but the grids use 100" in md
    assert (out / "soft_syntax_bias.png").is_file() and "soft_syntax_bias.png" in md
    saved = json.loads((out / "soft_syntax.json").read_text())
    assert saved["chosen_scale"] == "100" and saved["figure_run"].endswith("seed=0")
    judged = {(c["settings"]["dataset"], ss.kind_of(c["settings"]), c["against"]): c for c in saved["comparisons"]}
    assert set(judged) == {("trec", "dep bias", "complete"), ("trec", "dep bias", "dep")}  # finished cells only
    assert judged[("trec", "dep bias", "dep")]["verdict"] == "A higher"
    assert judged[("trec", "dep bias", "complete")]["noise"] == compare(soft, Cell((0.95, 0.952, 0.948), n=500)).noise
    # --table-only: the same table and verdicts from the JSON alone (no run directories)
    again = tmp_path / "again"
    again.mkdir()
    (again / "soft_syntax.json").write_text((out / "soft_syntax.json").read_text())
    assert ss.main(["--table-only", "--reference", str(ref), "--out", str(again)]) == 0
    assert (again / "soft_syntax.md").read_text() == md
    assert json.loads((again / "soft_syntax.json").read_text()) == saved


def bits(rng, acc, n=500):
    """Per-example predictions of a run right on ``acc`` of ``n`` test questions (encoded as train.py keeps them)."""
    right = np.zeros(n, dtype=bool)
    right[rng.choice(n, round(acc * n), replace=False)] = True
    return encode_correct(right, np.ones(n, dtype=bool), "trec test")


def test_runs_that_kept_their_predictions_are_compared_example_by_example(tmp_path):
    """Where the soft cell's and the reference's runs all kept per-example predictions on one test split, the
    row's verdict is tools.stats.compare on those predictions (the paired rule), and the table says so."""
    rng = np.random.default_rng(0)
    accs = {"complete": (0.95, 0.952, 0.948), "dep": (0.93, 0.92, 0.94)}
    preds = {g: [bits(rng, a) for a in tests] for g, tests in accs.items()}
    runs = tmp_path / "runs"
    soft_preds = [bits(rng, a) for a in (0.97, 0.968, 0.972)]
    for seed, (acc, p) in enumerate(zip((0.97, 0.968, 0.972), soft_preds)):
        fake_run(runs, [*BIAS, "model.structure_bias_lr_scale=100", f"seed={seed}"], acc, predictions=p)
    ref = reference(tmp_path / "pg.json", accs, preds)
    out, conf = tmp_path / "out", tmp_path / "soft_syntax.yaml"
    conf.write_text(GRIDS)
    assert ss.main(["--runs", str(runs), "--reference", str(ref), "--conf", str(conf), "--out", str(out)]) == 0
    md = (out / "soft_syntax.md").read_text()
    cells = [c.strip() for c in next(x for x in md.splitlines() if x.startswith("| TREC-6 | dep bias |")).split("|")]
    from engine.predictions import decode_correct

    def cell(accs, kept):
        return Cell(accs, correct=np.stack([decode_correct(p) for p in kept]), fingerprint="trec test")

    soft = cell((0.97, 0.968, 0.972), soft_preds)
    for at, graph in ((4, "complete"), (7, "dep")):
        v = compare(soft, cell(accs[graph], preds[graph]))
        assert v.rule == "paired"
        assert cells[at : at + 2] == [f"{100 * v.diff:+.2f}", f"{100 * v.noise:.2f}"]
    assert cells[10] == "paired"


def test_no_runs_no_reference_every_cell_not_run_yet(tmp_path):
    out = tmp_path / "out"
    args = ["--runs", str(tmp_path / "none"), "--reference", str(tmp_path / "none.json"), "--out", str(out)]
    assert ss.main([*args, "--figures", str(out)]) == 0
    md = (out / "soft_syntax.md").read_text()
    assert "No dep-bias run has finished: no figure yet." in md and not (out / "soft_syntax_bias.png").exists()
    assert md.count("not run yet") >= 3 and "Not measured yet" in md


def test_side_by_side_cost_is_read_from_its_file(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    timing = {
        "dataset": "sst_binary",
        "batch": 32,
        "reps": 15,
        "threads": 1,
        "seconds": {"complete": 2.0, "dep bias": 2.2},
        "vs_complete": {"complete": 1.0, "dep bias": 1.1},
        "command": "python -m studies.soft_syntax --time sst_binary",
    }
    (out / "soft_syntax_time.json").write_text(json.dumps(timing))
    args = ["--runs", str(tmp_path / "none"), "--reference", str(tmp_path / "none.json"), "--out", str(out)]
    assert ss.main([*args, "--figures", str(out)]) == 0
    md = (out / "soft_syntax.md").read_text()
    assert "| dep bias | 2.20 | 1.10× | – | – |" in md and "32 binary SST validation sentences" in md
    assert "(load 5-9)" in md  # a timing from before the load was kept says what it was then
    (out / "soft_syntax_time.json").write_text(json.dumps({**timing, "cores": 2, "load": [2.94, 3.01]}))
    assert ss.main([*args, "--figures", str(out)]) == 0
    md = (out / "soft_syntax.md").read_text()
    assert "2 cores were shared with other jobs while this ran (1-minute load average 2.9 at the start, 3.0" in md


def _pretrained_cell(dataset, graph, pairs, n_test=500, **extra):
    runs = [{"finished": True, "best_val_acc": v, "test_acc": t, "n_test": n_test} for v, t in pairs]
    return {"settings": {"dataset": dataset, "graph": graph, **extra}, "runs": runs}


def test_target_cell_is_chosen_on_mean_validation_among_three_seed_cells():
    # complete: mean val 0.90, test 0.95; fusion: mean val 0.91 (higher), test 0.94; a 1-seed cell higher still
    pretrained = [_pretrained_cell("trec", "complete", [(0.89, 0.95), (0.90, 0.95), (0.91, 0.95)])]
    soft = [
        {
            "settings": {"dataset": "trec", "graph": "complete", "model.syntax_layers": "1"},
            "runs": [{"finished": True, "best_val_acc": v, "test_acc": 0.94, "n_test": 500} for v in (0.9, 0.91, 0.92)],
        }
    ]
    phrases = [
        {"overrides": ["dataset=trec", "dataset.train_phrases=true", "seed=0"], "best_val_acc": 0.99, "test_acc": 0.9}
    ]
    cands = ss.target_candidates("trec", soft, pretrained, phrases)
    assert [c["name"] for c in cands] == [
        "pretrained_graphs dataset=trec graph=complete",
        "soft_syntax fusion (1 transformer block, dep)",
        "sst_phrases dataset=trec dataset.train_phrases=true",
    ]
    chosen, pending = ss.choose_target_cell(cands)
    assert chosen["name"].startswith("soft_syntax fusion")  # higher mean validation, although lower on test
    assert [c["name"] for c in pending] == ["sst_phrases dataset=trec dataset.train_phrases=true"]
    lines = "\n".join(ss.targets_section(soft, pretrained, phrases))
    assert "TREC-6 ≥ 96: 94.00 ± 0.00 (soft_syntax fusion" in lines and "missed by 2.00 points" in lines
    assert "higher on validation with 1 seed, not chosen: sst_phrases" in lines and "(6.00 short)" in lines


def test_target_tie_goes_to_the_cell_listed_first_and_sst2_transfer_counts_for_binary():
    pretrained = [
        _pretrained_cell("sst_binary", "complete", [(0.88, 0.87)] * 3, n_test=1821),
        _pretrained_cell("sst_binary", "bpt", [(0.88, 0.99)] * 3, n_test=1821),  # same validation: not chosen
        {
            "settings": {"dataset": "sst2", "graph": "complete"},
            "runs": [{"transfer": {"val": {"acc": 0.905}, "test": {"acc": 0.92, "n": 1821}}}],
        },
    ]
    chosen, pending = ss.choose_target_cell(ss.target_candidates("sst_binary", [], pretrained, []))
    assert chosen["name"] == "pretrained_graphs dataset=sst_binary graph=complete"
    assert [c["name"] for c in pending] == ["pretrained_graphs dataset=sst2 graph=complete, scored on binary SST"]
    text = "\n".join(ss.targets_section([], pretrained, []))
    assert "binary SST ≥ 91: 87.00 ± 0.00" in text and "(at or above it)" in text
    assert "SST-5 ≥ 52: no cell has 3 seeds yet." in text


def test_a_checkout_without_the_runs_keeps_its_committed_table(tmp_path, monkeypatch):
    """Building the table from a run folder with fewer runs than the committed results would write them over
    with fewer: it stops with one line naming --table-only, before anything is measured or written."""
    import pytest

    monkeypatch.setattr(ss, "measure_time", lambda *a, **k: pytest.fail("measured before the runs were checked"))
    out = tmp_path / "out"
    out.mkdir()
    committed = out / "soft_syntax.json"
    committed.write_text(json.dumps({"runs": [{"dir": "a"}, {"dir": "b"}], "cells": []}))
    before = committed.read_bytes()
    runs = tmp_path / "runs"
    fake_run(runs, [*BIAS, "model.structure_bias_lr_scale=100", "seed=0"], 0.97)  # 1 of the 2 committed
    for where in (tmp_path / "nowhere", runs):  # missing, and a folder of fewer runs
        with pytest.raises(SystemExit, match=r"holds \d runs, .* 2: add --table-only"):
            ss.main(["--runs", str(where), "--out", str(out), "--time", "sst_binary"])
    assert committed.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["soft_syntax.json"]


def test_a_json_whose_verdicts_another_rule_wrote_is_caught_by_check_docs(tmp_path):
    """pretrained_graphs' and soft_syntax's JSON keep their ``comparisons`` beside the cells; when the rule changes
    and only the table is drawn again, ``tools.check_docs`` names the file, the first stale row and the command."""
    from studies import pretrained_graphs as pg
    from tests.conftest import ROOT as root
    from tools import replay

    checks = {"pretrained_graphs": pg.comparisons_are_current, "soft_syntax": ss.comparisons_are_current}
    assert all(check in replay.declared_checks() for check in checks.values())  # what tools.check_docs runs
    assert all(check(tmp_path) == [] for check in checks.values())  # no JSON there: nothing to check
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    for name in checks:
        (results / f"{name}.json").write_text((root / "docs" / "results" / f"{name}.json").read_text())
    assert all(check(tmp_path) == [] for check in checks.values())  # the committed files are current
    for name, check in checks.items():
        path = results / f"{name}.json"
        kept = path.read_text()
        data = json.loads(kept)
        data["comparisons"][1]["noise"] /= 3**0.5  # as the old rule divided the test set's error by the seeds
        path.write_text(json.dumps(data))
        (problem,) = check(tmp_path)
        assert problem.startswith(f"docs/results/{name}.json: its comparisons are not what the rule gives today")
        assert "first at #1:" in problem and problem.endswith(f"rerun python -m studies.{name} --table-only")
        path.write_text(
            json.dumps({**json.loads(kept), "comparisons": json.loads(kept)["comparisons"][:-1]})
        )  # a row lost
        (problem,) = check(tmp_path)
        n = len(json.loads(kept)["comparisons"])
        assert f"({n - 1} committed, {n} now; first at #{n - 1}: nothing ->" in problem
        path.write_text(kept)


def test_a_json_judged_again_tolerates_the_last_bits_and_names_a_missing_reference(tmp_path):
    """``judged_as_committed``: a float that moved in its last bits is the same judgement, a file with no
    comparisons and none to make is current, and soft_syntax without pretrained_graphs' cells says so."""
    from tests.conftest import ROOT as root
    from tools.replay import judged_as_committed

    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    row = {"dataset": "trec", "diff": 0.1, "noise": 0.05, "verdict": "A higher"}
    (results / "x.json").write_text(json.dumps({"cells": [], "comparisons": [row]}))
    moved = [{**row, "diff": 0.1 + 1e-15}]
    assert judged_as_committed(tmp_path, "docs/results/x.json", lambda _r, _d: moved, "rerun x") == []
    (problem,) = judged_as_committed(tmp_path, "docs/results/x.json", lambda _r, _d: [{**row, "diff": 0.2}], "x")
    assert "first at #0:" in problem and "diff 0.1 " in problem and "diff 0.2 " in problem
    (results / "x.json").write_text(json.dumps({"cells": []}))  # no comparisons kept, and none to make
    assert judged_as_committed(tmp_path, "docs/results/x.json", lambda _r, _d: [], "rerun x") == []
    (results / "soft_syntax.json").write_text((root / "docs" / "results" / "soft_syntax.json").read_text())
    (problem,) = ss.comparisons_are_current(tmp_path)  # pretrained_graphs.json is not there
    assert problem == (
        "docs/results/soft_syntax.json: its reference cells' file docs/results/pretrained_graphs.json is missing"
    )
