"""Issue 35: per-run records (tools.records), tables replayed from them or sealed (tools.replay, tools.seals), and numbers
restated in prose tied to a cell (check_docs' refs and restated tables)."""

import json
import re
import shutil

import pytest

from tools import check_docs, records, replay, results_table, seals


def write_run(root, name, model, graph, seed, acc, curve, extra=()):
    """A finished run directory as train.py writes it: results.json, metrics.csv and Hydra's overrides."""
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    overrides = [f"model={model}", f"graph={graph}", f"seed={seed}", "trainer.progress=false", *extra]
    (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    results = {"model": model, "graph": graph, "seed": seed, "test_acc": acc, "best_val_acc": acc - 0.01}
    results |= {"best_epoch": len(curve), "train_seconds": 10.0 + seed, "examples_per_second": 100.0 + seed}
    results |= {"epochs": len(curve), "device": "cpu", "num_params": 7, "test_loss": 0.5, "wandb_mode": "off"}
    results |= {"test_by_depth": {"1": {"n": 4, "acc": acc}, "2": {"n": 2, "acc": 0.5}}, "test_by_root": None}
    (d / "results.json").write_text(json.dumps(results))
    rows = "".join(f"{e},{e * 10},0.001,{loss},0.5,0.7,{a},100,1.0\n" for e, (loss, a) in enumerate(curve, start=1))
    head = "epoch,step,lr,train_loss,train_acc,val_loss,val_acc,examples_per_second,seconds\n"
    (d / "metrics.csv").write_text(head + rows)
    return d


def sweep(root):
    write_run(root, "0_a", "gat", "tree", 0, 0.75, [(1.0, 0.5), (0.5, 0.7)])
    write_run(root, "1_b", "transformer", "complete", 0, 0.5, [(2.0, 0.4)])
    write_run(root, "2_c", "transformer", "complete", 1, 0.7, [(1.5, 0.6)])
    return root


@pytest.fixture
def records_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(records, "ROOT", tmp_path / "repo")
    return tmp_path / "repo" / records.RUNS


def test_a_record_is_slim_and_holds_what_the_table_shows(tmp_path, records_dir):
    path = records.write_from_runs(sweep(tmp_path / "multirun" / "x"), "x")
    assert path == records_dir / "x.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and max(map(len, lines)) < 4000  # a few kB a run at most
    first = json.loads(lines[0])
    assert first["overrides"] == ["graph=tree", "model=gat", "seed=0"]  # trainer.progress does not change a result
    assert first["curve"] == [
        {"epoch": 1, "val_acc": 0.5, "train_loss": 1.0},
        {"epoch": 2, "val_acc": 0.7, "train_loss": 0.5},
    ]
    assert (first["test_acc"], first["best_val_acc"], first["best_epoch"], first["seed"]) == (0.75, 0.74, 2, 0)
    assert (first["train_seconds"], first["examples_per_second"]) == (10.0, 100.0)
    assert "test_by_root" not in first and first["test_by_depth"]["2"] == {"n": 2, "acc": 0.5}
    assert first["commit"] == records.commit() and re.fullmatch(r"[0-9a-f]{40}(\+dirty)?|unknown", first["commit"])


def test_the_table_from_records_is_the_table_from_the_run_directories(tmp_path, records_dir):
    root = sweep(tmp_path / "multirun" / "x")
    records.write_from_runs(root, "x")
    from_dirs = results_table.collect(root)
    from_records = results_table.from_records(records.read("x"))
    assert results_table.tables(from_records) == results_table.tables(from_dirs)
    assert results_table.curve_groups(from_records) == results_table.curve_groups(from_dirs)
    assert "| transformer | 0.600 ± 0.141 (n=2) | – |" in results_table.tables(from_records)


def test_a_table_from_records_labels_its_rows_in_the_grids_order_not_the_records_sorted_one(tmp_path, records_dir):
    root = tmp_path / "multirun" / "training"
    for k, (norm, warmup, scaled) in enumerate([("pre", "0.0", "true"), ("post", "0.05", "false")]):
        extra = [f"model.norm={norm}", f"optim.warmup_ratio={warmup}", f"model.scaled={scaled}"]  # the grid's order
        write_run(root, f"{k}_r", "transformer", "complete", 0, 0.5 + k / 10, [(1.0, 0.5)], extra)
    records.write_from_runs(root, "training")
    assert records.read("training")[0]["overrides"][:3] == ["graph=complete", "model.norm=pre", "model.scaled=true"]
    order = results_table.grid_keys("training")  # conf/experiment/training.yaml's grid
    assert order == ["model.norm", "optim.warmup_ratio", "model.scaled", "seed"]
    from_dirs = results_table.tables(results_table.collect(root))
    assert "| model.norm, optim.warmup_ratio, model.scaled | test accuracy |" in from_dirs
    assert results_table.tables(results_table.from_records(records.read("training"), order)) == from_dirs
    sorted_labels = results_table.tables(results_table.from_records(records.read("training")))
    assert "| model.norm, model.scaled, optim.warmup_ratio | test accuracy |" in sorted_labels
    assert results_table.grid_keys("no_such_experiment") == []


def test_a_rerun_replaces_its_own_lines_only(tmp_path, records_dir):
    records.write_from_runs(sweep(tmp_path / "multirun" / "x"), "x")
    before = (records_dir / "x.jsonl").read_text().splitlines()
    rerun = tmp_path / "rerun"
    write_run(rerun, "0_b", "transformer", "complete", 1, 0.9, [(1.0, 0.9)])  # seed 1 again
    write_run(rerun, "1_n", "gcn", "tree", 0, 0.4, [(1.0, 0.3)])  # a new cell
    records.write_from_runs(rerun, "x")
    after = (records_dir / "x.jsonl").read_text().splitlines()
    assert after[:2] == before[:2]  # the other runs' lines, byte for byte
    assert json.loads(after[2])["test_acc"] == 0.9 and json.loads(after[3])["model"] == "gcn"
    assert len(after) == 4 and not list(records_dir.glob("*.tmp"))  # written to a temporary file, then renamed


def test_two_runs_with_the_same_overrides_are_refused_and_the_file_is_untouched(tmp_path, records_dir):
    records.write_from_runs(sweep(tmp_path / "multirun" / "x"), "x")
    before = (records_dir / "x.jsonl").read_text()
    twins = tmp_path / "twins"
    write_run(twins, "0_a", "gat", "tree", 0, 0.1, [(1.0, 0.1)])
    write_run(twins, "1_a", "gat", "tree", 0, 0.2, [(1.0, 0.2)])
    with pytest.raises(ValueError, match="two runs of x have the same overrides"):
        records.write_from_runs(twins, "x")
    assert (records_dir / "x.jsonl").read_text() == before
    assert records.main([str(tmp_path / "nothing"), "x"]) == 2


# ---------------------------------------------------------------- check_docs on a copy of the docs


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """A copy of the pages and their evidence that the checker reads instead of the repository."""
    for name in ("docs", "conf", "tutorials"):
        shutil.copytree(check_docs.ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("*.png"))
    shutil.copy(check_docs.ROOT / "README.md", tmp_path / "README.md")
    for png in (check_docs.ROOT / "docs").rglob("*.png"):
        (tmp_path / png.relative_to(check_docs.ROOT)).touch()
    for entry in check_docs.ROOT.iterdir():
        if not (tmp_path / entry.name).exists() and entry.name not in (".git", ".venv", "multirun", "outputs"):
            (tmp_path / entry.name).symlink_to(entry)
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    assert check_docs.check() == []
    return tmp_path


SEALED = "docs/results/aggregation.md"


def seal_in(copy):
    """aggregation in the copy as it was before its rerun: its records gone, its rows sealed (no table of the
    repository is both sealed and rerunnable now: before/graph_choice cannot be rerun)."""
    page = copy / SEALED
    header = f"{seals.NOTE}`make experiment E=aggregation` (this table is sealed, not replayed).\n\n"
    page.write_text(header + page.read_text())
    seals.seal(copy, SEALED, "make experiment E=aggregation")
    path = copy / records.RUNS / "aggregation.jsonl"  # the Transformer's tree runs not recorded yet (none is cited)
    kept = [line for line in path.read_text().splitlines() if '"graph=tree","model=transformer"' not in line]
    path.write_text("".join(line + "\n" for line in kept))
    rechance(copy)  # those records held predictions: the one-label runs are read again, as chance.py would
    assert check_docs.check() == [] and len(kept) == 21


def rechance(copy):
    """``python -m studies.long_range.chance`` in the copy, for the sets that read the records: what it read."""
    from engine.io import write_json
    from studies import long_range

    path = copy / long_range.CHANCE_JSON
    data = json.loads(path.read_text())
    for made in data["sets"]:
        block = made.get("one_label")
        if block and "fingerprint" in block:
            block["read"] = long_range.digest(copy, block["fingerprint"])
            block["records"] = sum(1 for _ in long_range.scored_on(copy, block["fingerprint"]))
    write_json(path, data)
    path.with_suffix(".md").write_text(long_range.chance_markdown(data))


def edit(path, old, new):
    """Replace the first ``old`` in ``path``; the line number it is on."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))
    return text[: text.index(old)].count("\n") + 1


@pytest.mark.parametrize(
    "page, old, new, says",
    [
        # generated tables: replayed from JSON (two), from per-run records (one) and sealed (one: its runs are lost)
        ("docs/results/pretrained_graphs.md", "87.59 ± 0.48", "87.69 ± 0.48", "studies.pretrained_graphs.markdown"),
        ("docs/results/pretrained_syntax.md", "| 3-2 | 35.3 |", "| 3-2 | 35.4 |", "studies.pretrained_syntax.markdown"),
        (
            "docs/results/sst_glove.md",
            "| all | 0.845 ± 0.006 (n=3) |",
            "| all | 0.855 ± 0.006 (n=3) |",
            "tools.results_table(docs/results/runs/sst_glove.jsonl) writes",
        ),
        (SEALED, "| transformer | 0.577 ± 0.007", "| transformer | 0.587 ± 0.007", "sealed copy"),
        ("docs/results/listops_best.md", "| 0 | 99.56 |", "| 0 | 99.66 |", "studies.listops_best.table_from_json"),
        # a restated table in the essay, and prose tied to a cell by a reference
        ("docs/essay.md", "| binary SST | **87.6 ± 0.5**", "| binary SST | **88.6 ± 0.5**", "restated cell"),
        ("docs/essay.md", "| 4 | 0.420 ± 0.016 |", "| 4 | 0.430 ± 0.016 |", "restated cell"),
        # a real-sentences result restated in prose: a mean, and the std of a "mean ± std" tied by one reference
        ("docs/real_sentences.md", "81.9% <!--", "82.9% <!--", "says 82.9"),
        ("docs/real_sentences.md", "84.9 ± 1.7 <!--", "84.9 ± 2.7 <!--", "says 2.7, docs/results/trec.md:"),
        # one tutorial's asserted claim, in its prose and in the list of claims its code asserts
        ("tutorials/05_what_the_experiments_found.py", "9.1 points <!--", "9.2 points <!--", "says 9.2"),
        ("tutorials/05_what_the_experiments_found.py", '"A higher", 9.1),', '"A higher", 9.3),', "says 9.3"),
    ],
)
def test_a_number_changed_by_hand_fails_naming_file_and_line(copy, page, old, new, says):
    if says == "sealed copy":
        seal_in(copy)
    line = edit(copy / page, old, new)
    problems = [p for p in check_docs.check() if p.startswith(f"{page}:")]  # (pages restating it fail too)
    own = [p for p in problems if p.startswith(f"{page}:{line}: ")]  # (and so may the page's own analysis)
    assert len(own) == 1 and says in own[0], problems
    assert check_docs.main([]) == 1


def test_a_restated_table_names_the_value_its_source_has(copy):
    line = edit(copy / "docs" / "essay.md", "| binary SST | **87.6 ± 0.5**", "| binary SST | **88.6 ± 0.5**")
    (problem,) = check_docs.check()
    assert problem == (
        f"docs/essay.md:{line}: restated cell 'binary SST' / 'complete' says '**88.6 ± 0.5**', which no cell of "
        f"docs/results/pretrained_graphs.md states, docs/results/pretrained_graphs.md:16 has 87.59 0.48 3 87.84 3"
    )


def test_a_reference_names_the_value_it_points_at_and_bad_references_fail(copy):
    page = copy / "docs" / "testing.md"
    text = page.read_text()
    ref = "<!-- ref: docs/results/pretrained_graphs.md > binary SST > complete -->"
    page.write_text(text + f"\nBinary SST, complete graph: 87.6 {ref}; in percent of one: 0.876 {ref}.\n")
    assert check_docs.check() == []
    n = len(page.read_text().splitlines())
    page.write_text(text + f"\nBinary SST, complete graph: 87.7 {ref}.\n")
    assert check_docs.check() == [f"docs/testing.md:{n}: says 87.7, docs/results/pretrained_graphs.md:16 has 87.59"]
    page.write_text(
        text + "\nA JSON value: 0.835 <!-- ref: docs/results/sst_glove_choice/tuned_lr1e-3.json > best_val_acc -->\n"
    )
    assert check_docs.check() == []
    page.write_text(text + "\nNo such cell: 1.0 <!-- ref: docs/results/pretrained_graphs.md > binary SST > knn -->\n")
    assert check_docs.check() == [
        f"docs/testing.md:{n}: docs/results/pretrained_graphs.md has no cell 'binary SST' / 'knn'"
    ]


def test_a_seed_behind_a_mean_is_tied_to_its_own_record(copy):
    """``FILE.jsonl > OVERRIDES > KEY``: the one run whose overrides but experiment= are those named."""
    page = copy / "docs" / "testing.md"
    text = page.read_text()
    ref = "<!-- ref: docs/results/runs/sst_glove.jsonl > seed=2 > {} -->"
    page.write_text(text + f"\nSeed 2: 0.850 {ref.format('test_acc')}, at epoch 14 {ref.format('best_epoch')}.\n")
    assert check_docs.check() == []
    n = len(page.read_text().splitlines())
    page.write_text(text + f"\nSeed 2: 0.851 {ref.format('test_acc')}.\n")
    assert check_docs.check() == [
        f"docs/testing.md:{n}: says 0.851, docs/results/runs/sst_glove.jsonl has 0.8500823723228995"
    ]
    for selector, says in [
        ("seed=7 > test_acc", "has 0 runs with the overrides seed=7, not one"),
        ("seed=7", "write FILE.jsonl > OVERRIDE; OVERRIDE > KEY"),
        ("seed=2 > nope", "docs/results/runs/sst_glove.jsonl > seed=2 has no nope"),
        ("seed=2 > curve", "is not a number"),
    ]:
        page.write_text(text + f"\nA seed: 0.850 <!-- ref: docs/results/runs/sst_glove.jsonl > {selector} -->\n")
        (problem,) = check_docs.check()
        assert problem.startswith("docs/testing.md") and says in problem, problem


def test_a_table_replayed_from_records_fails_on_a_changed_number_and_names_both_values(copy, tmp_path, monkeypatch):
    """The path every experiment takes: make experiment writes the records, the table is drawn from them,
    check_docs draws it again."""
    monkeypatch.setattr(records, "ROOT", copy)
    records.write_from_runs(sweep(tmp_path / "multirun" / "x"), "x")
    table = copy / "docs" / "results" / "x.md"
    args = [str(records.RUNS / "x.jsonl"), f"--out={table}", "--command=make experiment E=x"]
    monkeypatch.chdir(copy)
    assert results_table.main(args) == 0
    table.write_text(table.read_text() + "\n## Analysis\n\nWritten by a person: 0.600 is not replayed.\n")
    assert check_docs.check() == []
    assert "docs/results/x.md" in {t.table for t in replay.tables(copy)}
    line = edit(table, "0.600 ± 0.141 (n=2)", "0.610 ± 0.141 (n=2)")
    (problem,) = check_docs.check()
    assert problem.startswith(f"docs/results/x.md:{line}: has '| transformer | 0.610 ± 0.141 (n=2) | – |', ")
    assert problem.endswith(
        "tools.results_table(docs/results/runs/x.jsonl) writes '| transformer | 0.600 ± 0.141 (n=2) | – |'"
    )


def test_every_table_is_replayed_or_sealed_and_a_sealed_one_says_so(copy, capsys):
    assert check_docs.main([]) == 0
    replayed, sealed = check_docs.table_counts()
    assert f"{replayed} tables replayed from committed records, {len(sealed)} without per-run records" in (
        capsys.readouterr().out
    )
    assert replayed >= 6 and sealed == ["docs/results/before/graph_choice.md"]
    seal_in(copy)
    replayed_now, sealed = check_docs.table_counts()
    assert replayed_now == replayed - 1 and SEALED in sealed
    page = copy / "docs" / "results" / "aggregation.md"
    edit(page, "per-run records not committed; rerun: `make experiment E=aggregation`", "rerun it")
    assert check_docs.check() == [
        "docs/results/aggregation.md:1: the header (above the first table) must say "
        "'per-run records not committed; rerun: `make experiment E=aggregation`'"
    ]
    (copy / "docs" / "results" / "new.md").write_text("| a |\n|---|\n| 1 |\n")
    assert any(p.startswith("docs/results/new.md: neither replayed nor sealed") for p in check_docs.check())


def test_writing_the_records_of_runs_not_rerun_keeps_their_lines_and_commit(tmp_path, records_dir):
    root = sweep(tmp_path / "multirun" / "x")
    records.write_from_runs(root, "x", at="a" * 40)
    before = (records_dir / "x.jsonl").read_text()
    records.write_from_runs(root, "x", at="b" * 40)  # --table-only, or a rerun of other cells: nothing changed
    assert (records_dir / "x.jsonl").read_text() == before
    write_run(root, "3_d", "transformer", "complete", 2, 0.6, [(1.0, 0.6)])
    records.write_from_runs(root, "x", at="b" * 40)
    assert [json.loads(line)["commit"][0] for line in (records_dir / "x.jsonl").read_text().splitlines()] == list(
        "aaab"
    )


def test_a_sealed_table_rerun_in_parts_stays_held_to_its_seal_and_its_progress_is_printed(copy, capsys):
    """make experiment ARGS=--missing commits the records of a part of the runs: the table is not replayed
    from them (it would be a partial table); its seal holds it, and check_docs says how far the rerun is."""
    from tools import experiment

    seal_in(copy)
    assert len(experiment.planned("aggregation", [])) == 24
    assert check_docs.main([]) == 0
    assert (
        "docs/results/aggregation.md: 21 of the 24 runs its grids plan are recorded, sealed until they are all "
        "recorded; the rest: make experiment E=aggregation ARGS=--missing"
    ) in capsys.readouterr().out
    line = edit(copy / SEALED, "| transformer | 0.577 ± 0.007", "| transformer | 0.587 ± 0.007")
    assert (
        f"docs/results/aggregation.md:{line}: has '| transformer | 0.587 ± 0.007 (n=3) | 0.668 ± 0.000 (n=3) |', "
        "the sealed copy (docs/results/runs/unrecorded.json) has "
        "'| transformer | 0.577 ± 0.007 (n=3) | 0.668 ± 0.000 (n=3) |'"
    ) in check_docs.check()


def test_a_record_with_predictions_is_not_replaced_by_a_run_directory_without_them(tmp_path, records_dir):
    root = sweep(tmp_path / "multirun" / "x")
    records.write_from_runs(root, "x", at="a" * 40)
    lines = [json.loads(line) for line in (records_dir / "x.jsonl").read_text().splitlines()]
    # the transformer's seed 1 since copied from another experiment's run that kept its predictions (tools.share)
    lines[2] |= {"test_acc": 0.71, "test_predictions": {"fingerprint": "f", "n": 6}, "shared_from": "other: seed=1"}
    records_dir.joinpath("x.jsonl").write_text("".join(records.line_of(r) + "\n" for r in lines))
    records.write_from_runs(root, "x", at="b" * 40)  # the old run directories gathered again
    again = [json.loads(line) for line in (records_dir / "x.jsonl").read_text().splitlines()]
    assert again[2] == lines[2]
    # a run directory that kept predictions does replace it
    run = json.loads((root / "2_c" / "results.json").read_text())
    (root / "2_c" / "results.json").write_text(json.dumps(run | {"test_predictions": {"fingerprint": "g", "n": 6}}))
    records.write_from_runs(root, "x", at="c" * 40)
    last = json.loads((records_dir / "x.jsonl").read_text().splitlines()[2])
    assert last["test_predictions"]["fingerprint"] == "g" and "shared_from" not in last and last["commit"] == "c" * 40
