"""tools.check_docs: the README headline, generated tables and cited files agree with the evidence."""

import json
import re
import shutil

import pytest

from studies import listops_best
from tools import check_docs, experiment
from tools.headline import END, START
from tools.headline import rewrite as rewrite_headline


def test_the_repository_agrees_with_its_evidence():
    assert check_docs.check() == []


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """A copy of the pages and their evidence that the checker reads instead of the repository."""
    for name in ("docs", "conf", "tutorials"):
        shutil.copytree(check_docs.ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("*.png"))
    shutil.copy(check_docs.ROOT / "README.md", tmp_path / "README.md")
    for png in (check_docs.ROOT / "docs").rglob("*.png"):  # linked figures: empty stand-ins are enough
        (tmp_path / png.relative_to(check_docs.ROOT)).touch()
    for entry in check_docs.ROOT.iterdir():  # everything else the pages link to (code, Makefile): as it is
        if not (tmp_path / entry.name).exists() and entry.name not in (".git", ".venv", "multirun", "outputs"):
            (tmp_path / entry.name).symlink_to(entry)
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    monkeypatch.setattr(experiment, "ROOT", tmp_path)  # make experiment rewrites the copy's headline, not ours
    assert check_docs.check() == []  # the copy passes before it is edited
    return tmp_path


def _edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_a_headline_number_changed_by_hand_in_the_readme_fails(copy):
    readme = copy / "README.md"
    line = next(k for k, text in enumerate(readme.read_text().splitlines(), 1) if "99.61 ± 0.21" in text)
    _edit(readme, "99.61 ± 0.21", "99.71 ± 0.21")
    problems = check_docs.check()
    assert problems == [
        f"README.md:{line}: headline table says 99.71, docs/results/headline.json gives 99.61 "
        "(edit the JSON's sources, then `python -m tools.check_docs --write-headline`)"
    ]
    assert check_docs.main([]) == 1


def test_a_number_of_the_headline_details_page_changed_by_hand_fails(copy):
    page = copy / "docs" / "headline.md"
    line = next(k for k, text in enumerate(page.read_text().splitlines(), 1) if "on the bpt graph 24.8" in text)
    _edit(page, "on the bpt graph 24.8", "on the bpt graph 25.8")
    assert check_docs.check() == [
        f"docs/headline.md:{line}: headline table says 25.8, docs/results/headline.json gives 24.8 "
        "(edit the JSON's sources, then `python -m tools.check_docs --write-headline`)"
    ]


def test_the_readme_is_a_first_five_minutes_page():
    """At most 200 lines: what this is with one figure, the two set-up commands, a quickstart that shows the
    complete graph against the tree, the short headline table (its details in docs/headline.md), a GPU section."""
    readme = (check_docs.ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert len(re.findall(r"^!\[", readme, re.M)) == 1
    for text in (
        "make install",
        "make test",
        "train.py model=gat graph=complete",
        "model=transformer graph=complete",
        "model=transformer graph=tree",
        "## On a GPU",
        "data.dgl.ai/wheels/torch-2.2/cu121",
        "docs/headline.md",
    ):
        assert text in readme, text
    assert "../shared" not in readme  # no path of one machine
    short = readme[readme.index(START) : readme.index(END)].splitlines()[3:]
    for row in short:  # one number (with its ± and seeds) per result cell
        for cell in row.strip("|").split("|")[1:4]:
            assert len(re.findall(r"\d+\.\d+", cell)) <= 2, cell


def test_a_headline_number_that_leaves_its_results_file_fails(copy):
    headline = copy / "docs" / "results" / "headline.json"
    _edit(headline, '"value": "24.8"', '"value": "25.8"')  # edited in the JSON and rendered into the README
    rewrite_headline(copy, json.loads(headline.read_text()))  # README's short table and docs/headline.md's
    problems = check_docs.check()
    assert len(problems) == 1
    assert problems[0].startswith("docs/results/headline.json: row 'ListOps 501–1,999 tokens, trained on ≤ 100'")
    assert "says 25.8, docs/results/long_range_lengths.md:" in problems[0] and problems[0].endswith("has 24.8")


def test_a_best_from_scratch_cell_not_chosen_on_validation_fails(copy):
    headline = copy / "docs" / "results" / "headline.json"
    data = json.loads(headline.read_text())
    (row,) = [r for r in data["rows"] if r["task"] == "binary SST"]
    choice = row["chosen_on_validation"]
    choice["chosen"]["col"] = "dep"  # the best on test, not on validation
    headline.write_text(json.dumps(data))
    problems = check_docs.check()
    assert problems == [
        "docs/results/headline.json: row 'binary SST': value 18 (docs/results/sst_binary.md: treelstm, tree) "
        "is not the cell chosen on validation (docs/results/sst_binary.md: treelstm, dep)"
    ]
    row["values"][choice["value"]]["col"] = "dep"
    row["values"][choice["value"] + 1]["col"] = "dep"
    headline.write_text(json.dumps(data))
    assert check_docs.main(["--write-headline"]) == 1  # its numbers read again: only the choice is wrong now
    assert check_docs.check() == [
        "docs/results/headline.json: row 'binary SST': docs/results/sst_binary.md (treelstm, tree) has 0.774 on "
        "validation, above the chosen cell's 0.762 (treelstm, dep): choose on validation",
        "docs/results/headline.json: row 'binary SST': docs/results/sst_tai.md (sst_binary, True, best validation "
        "accuracy) has 0.773 on validation, above the chosen cell's 0.762 (treelstm, dep): choose on validation",
    ]


def test_a_choice_among_a_misspelt_row_or_no_seeded_cell_fails_instead_of_passing_on_nothing(copy):
    headline = copy / "docs" / "results" / "headline.json"
    data = json.loads(headline.read_text())
    (row,) = [r for r in data["rows"] if r["task"] == "binary SST"]
    among = [a for a in row["chosen_on_validation"]["among"] if a.get("rows")][0]
    among["rows"] = [*among["rows"], "sst_binary, flase"]
    headline.write_text(json.dumps(data))
    assert any("has no row 'sst_binary, flase'" in p for p in check_docs.check())
    among["rows"].pop()
    row["chosen_on_validation"]["min_seeds"] = 99  # no cell has that many seeds: nothing would be compared
    headline.write_text(json.dumps(data))
    assert (
        "docs/results/headline.json: row 'binary SST': no candidate of 99+ seeds to choose among" in check_docs.check()
    )


def test_a_results_file_that_changes_fails_until_the_headline_is_written_again(copy):
    _edit(copy / "docs" / "results" / "sst_binary.md", "0.770 ± 0.005 (n=3)", "0.780 ± 0.005 (n=3)")
    problems = check_docs.check()
    assert "says 77.0, docs/results/sst_binary.md:" in problems[0] and problems[0].endswith("has 78.0")
    assert problems[1].startswith("docs/results/sst_binary.md:")  # replayed: its records write 0.770
    assert "(docs/results/runs/sst_binary.jsonl) writes" in problems[1] and "0.770 ± 0.005 (n=3)" in problems[1]
    prose = problems[2:]  # every sentence and table restating the cell (or a difference from it), by page and line
    assert {p.split(":")[0] for p in prose} == {
        "docs/real_sentences.md",
        "docs/essay.md",
        "docs/results/sst_binary_glove.md",  # its analysis: GloVe's lift over this cell
    }
    assert all(p.split(":")[1].isdigit() for p in prose)
    assert any(p.endswith(": says 77.0, docs/results/sst_binary.md:10 has 0.780") for p in prose)
    assert any(
        p.endswith(
            "says '0.770 ± 0.005', which no cell of docs/results/sst_binary.md states, "
            "docs/results/sst_binary.md:10 has 0.780 0.005 3"
        )
        for p in prose
    )
    assert check_docs.main(["--write-headline"]) == 1  # the generator reads it again: README and JSON agree
    assert "on the dependency tree 78.0 ± 0.5" in (copy / "docs" / "headline.md").read_text()
    assert check_docs.check() == problems[1:]  # what is left: the table differs from its records and its restatements
    records = copy / "docs" / "results" / "runs" / "sst_binary.jsonl"
    lines = []
    for line in records.read_text().splitlines():  # as a rerun's new records: the Tree-LSTM on dep, 1 point up
        run = json.loads(line)
        if run["model"] == "treelstm" and run["graph"] == "dep":
            run["test_acc"] += 0.01
        lines.append(json.dumps(run))
    records.write_text("\n".join(lines) + "\n")
    assert check_docs.main(["--render", "docs/results/sst_binary.md"]) == 1  # the table drawn from them
    # the verdicts the pages state are judged from these records too: their JSON is stale until written again
    stale, *rest = check_docs.check()
    assert stale.startswith("docs/results/verdicts.md:1:") and "verdicts.json is stale" in stale
    assert rest == prose  # and the pages still restate the old number until the prose follows it
    _edit(copy / "docs" / "real_sentences.md", "0.770 ± 0.005", "0.780 ± 0.005")
    assert len(check_docs.check()) == 1 + len(prose) - 1


def test_a_generated_table_edited_by_hand_fails(copy):
    _edit(copy / "docs" / "results" / "essay.md", "| **all**", "| **every**")
    problems = check_docs.check()
    assert len(problems) == 1 and problems[0].startswith("docs/results/essay.md:")
    assert "studies.essay.table_from_json(docs/results/essay.json) writes" in problems[0]
    _edit(copy / "docs" / "results" / "essay.md", "| **every**", "| **all**")
    _edit(copy / "docs" / "results" / "listops_best.md", "**99.61 ± 0.21**", "**99.81 ± 0.21**")
    problems = check_docs.check()  # the table disagrees with its JSON, the headline and the prose with it
    assert len(problems) == 6 and problems[1].startswith("docs/results/listops_best.md:27: has '| **mean ± std** |")
    assert problems[0].endswith("says 99.61, docs/results/listops_best.md:27 has 99.81")
    line = next(k for k, text in enumerate((copy / "README.md").read_text().splitlines(), 1) if "99.6% <!--" in text)
    assert problems[2] == f"README.md:{line}: says 99.6, docs/results/listops_best.md:27 has 99.81"
    prose = [p.split(":")[0] for p in problems[3:]]  # every page that restates the number, each naming its line
    assert prose == ["docs/essay.md", "docs/listops.md", "docs/listops.md"]
    assert all(p.endswith(", docs/results/listops_best.md:27 has 99.81") for p in problems[3:])


def test_a_missing_link_or_cited_file_fails(copy):
    page = copy / "docs" / "essay.md"
    page.write_text(page.read_text() + "\nSee [gone](results/gone.md) and `docs/results/small/gone.json`.\n")
    n = len(page.read_text().splitlines())
    assert check_docs.check() == [
        f"docs/essay.md:{n}: link to results/gone.md, which does not exist",
        f"docs/essay.md:{n}: cites docs/results/small/gone.json, which does not exist",
    ]
    (copy / "docs" / "results" / "sst.md").unlink()  # a file the headline reads
    assert any("docs/results/sst.md does not exist" in p for p in check_docs.check())


def test_listops_best_reads_its_runs(tmp_path, monkeypatch):
    data = json.loads((check_docs.ROOT / "docs" / "results" / "listops_best.json").read_text())
    run = tmp_path / "runs" / "0_seed0"
    (run / "eval_published").mkdir(parents=True)
    (run / "eval_unseen").mkdir()
    by_root = {op: {"acc": 0.5, "n": 10} for op in (*listops_best.OPS, "digit")}
    results = {"seed": 0, "test_acc": 0.9, "test_by_root": by_root, "best_val_acc": 0.91, "best_epoch": 3}
    results |= {"train_seconds": 12.4, "test_by_depth": {"1": {"acc": 1.0, "n": 4}}}
    (run / "results.json").write_text(json.dumps(results))
    (run / "eval_published" / "eval.json").write_text(json.dumps({"accuracy": 0.8, "by_root": by_root}))
    (run / "eval_unseen" / "eval.json").write_text(json.dumps({"accuracy": 0.7, "by_root": by_root}))
    new = listops_best.read_runs(tmp_path / "runs", data)
    seed0 = new["seeds"][0]
    assert (seed0["test_acc"], seed0["published_acc"], seed0["unseen_acc"]) == (90.0, 80.0, 70.0)
    assert seed0["train_seconds"] == 12 and seed0["unseen_by_root"]["[SM"] == 50.0
    assert new["seeds"][1] == data["seeds"][1]  # seeds without new runs keep their numbers
    assert "| 0 | 90.00 | 50.00 |" in listops_best.table_from_json(new)
    (run / "eval_unseen" / "eval.json").unlink()
    (run.parent / "3_seed3").mkdir()
    (run.parent / "3_seed3" / "results.json").write_text(json.dumps({**results, "seed": 3}))
    with pytest.raises(ValueError, match="seed 3 has no evaluate.py columns"):
        listops_best.read_runs(tmp_path / "runs", data)


def test_listops_best_experiment_keeps_the_committed_table(monkeypatch):
    calls = []
    monkeypatch.setattr(experiment.subprocess, "call", lambda cmd, cwd=None: calls.append(cmd[1:]) or 0)
    assert experiment.main(["listops_best"]) == 0
    assert calls[0][:3] == ["train.py", "-m", "experiment=listops_best"] and "seed=0,1,2" in calls[0]
    table = calls[1]
    assert table[:2] == ["-m", "tools.results_table"]
    assert "--out=multirun/listops_best/results.md" in table  # never docs/results/listops_best.md
    assert table[2] == "docs/results/runs/listops_best.jsonl"  # drawn from the committed records
    assert not any("docs/" in arg for arg in table[3:])
    assert sum(c[:2] == ["-m", "evaluate"] for c in calls) == 6
    assert calls[-1] == ["-m", "studies.listops_best", "--runs", "multirun/listops_best"]


def test_an_experiment_whose_table_feeds_the_headline_rewrites_it(copy, monkeypatch):
    _edit(copy / "docs" / "results" / "trec.md", "0.877 ± 0.025 (n=3)", "0.887 ± 0.025 (n=3)")  # as a rerun would
    monkeypatch.setattr(experiment.subprocess, "call", lambda cmd, cwd=None: 0)
    assert experiment.main(["trec", "--table-only"]) == 0
    assert "Tree-LSTM on the dependency tree: 88.7 ± 2.5" in (copy / "README.md").read_text()
    problems = check_docs.check()  # the headline agrees; the table differs from its records and its restatements
    assert (
        problems[0].startswith("docs/results/trec.md:")
        and "tools.results_table(docs/results/runs/trec.jsonl)" in problems[0]
    )
    assert {p.split(":")[0] for p in problems[1:]} == {"docs/real_sentences.md"}  # sentences and a table restating it
    assert any(p.endswith(": says 87.7, docs/results/trec.md:10 has 0.887") for p in problems[1:])
    assert any(p.endswith(": says 0.877, docs/results/trec.md:10 has 0.887") for p in problems[1:])
    assert any("which no cell of docs/results/trec.md" in p for p in problems[1:])
    assert experiment.refresh_headline("docs/results/heads.md") == 0  # not in the headline: nothing to do


def test_render_writes_a_replayed_table_again_from_changed_records(copy):
    """A new phrase-level run in the records moves two tables: sst_phrases.md (drawn from the records) and
    soft_syntax.md (its targets section chooses among them; the records are a declared source, so the copy's
    records are read, not the repository's). ``--render`` writes both again, keeping sst_phrases' prose."""
    records = copy / "docs" / "results" / "runs" / "sst_phrases.jsonl"
    first = json.loads(records.read_text().splitlines()[0])
    new = {**first, "overrides": [o if not o.startswith("seed=") else "seed=7" for o in first["overrides"]], "seed": 7}
    new.update(best_val_acc=0.60, test_acc=0.61)
    records.write_text(records.read_text() + json.dumps(new) + "\n")
    runs = len(records.read_text().splitlines())
    prose = (copy / "docs" / "results" / "sst_phrases.md").read_text().split("\n## ", 1)[1]

    def broken_tables():
        tables = ("docs/results/soft_syntax.md", "docs/results/sst_phrases.md")
        return sorted({p.split(":")[0] for p in check_docs.check() if p.startswith(tables)})

    assert broken_tables() == ["docs/results/soft_syntax.md", "docs/results/sst_phrases.md"]
    assert check_docs.main(["--render", "docs/results/soft_syntax.md", "docs/results/sst_phrases.md"]) == 1
    assert broken_tables() == []  # the prose restating the old mean still fails: that is the point of refs
    table = (copy / "docs" / "results" / "sst_phrases.md").read_text()
    assert f"({runs} runs," in table.splitlines()[0] and table.split("\n## ", 1)[1] == prose
    assert (
        "sst_phrases dataset.train_phrases=True dataset=sst graph=complete"
        in (copy / "docs" / "results" / "soft_syntax.md").read_text()
    )


def test_render_refuses_a_sealed_or_unknown_table_or_a_lost_source(copy, capsys):
    assert check_docs.main(["--render", "docs/results/before/graph_choice.md"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: docs/results/before/graph_choice.md: sealed, no committed records to render it from; "
        "per-run records not committed; rerun: none"
    )
    assert check_docs.main(["--render", "docs/results/nothing.md"]) == 2
    assert "docs/results/nothing.md: no committed source draws it; replayed tables: " in capsys.readouterr().err
    (copy / "docs" / "results" / "long_range_lengths.json").unlink()
    assert check_docs.main(["--render", "docs/results/long_range_lengths.md"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: docs/results/long_range_lengths.md: its source") and "\n" not in err


def test_sst_syntax_is_drawn_from_its_six_syntax_files(copy):
    """sst_syntax.md's table is replayed from the six committed syntax.json (no run directory needed): a
    changed score fails on the table's row and on the prose that restates it, until --render writes the table
    again (prose kept) and the prose is corrected."""
    page = copy / "docs" / "results" / "sst_syntax.md"
    source = copy / "docs" / "results" / "sst_syntax" / "seed1_gold" / "syntax.json"
    data = json.loads(source.read_text())
    data["accuracy"] = 0.351
    source.write_text(json.dumps(data))
    problems = check_docs.check()
    row = next(k for k, line in enumerate(page.read_text().splitlines(), 1) if line.startswith("| 1 |"))
    assert any(p.startswith(f"docs/results/sst_syntax.md:{row}: has '| 1 | 0.358 |") for p in problems), problems
    assert any("says 36, docs/results/sst_syntax/seed1_gold/syntax.json has 0.351" in p for p in problems), problems
    prose = page.read_text().split("\n## ", 1)[1]
    assert check_docs.main(["--render", "docs/results/sst_syntax.md"]) == 1  # the prose still says 36%
    assert "| 1 | 0.351 |" in page.read_text() and page.read_text().split("\n## ", 1)[1] == prose
    _edit(page, "36% <!--", "35% <!--")
    assert check_docs.check() == []


def test_sst_syntax_table_wants_a_gold_and_a_dep_result_of_one_checkpoint_per_seed():
    from studies.attention_syntax import sst_seeds_table

    run = "multirun/sst/graph=complete,model=transformer,seed=0/checkpoints/best.pt"
    gold, dep = {"tree": "gold", "checkpoint": run}, {"tree": "dep", "checkpoint": run}
    with pytest.raises(ValueError, match="a gold and a dep result per seed, got 3 results"):
        sst_seeds_table(gold, dep, gold)
    with pytest.raises(ValueError, match="pair 0: expected a gold then a dep result of one checkpoint"):
        sst_seeds_table(dep, gold)
    with pytest.raises(ValueError, match="pair 0: "):
        sst_seeds_table(gold, {**dep, "checkpoint": run.replace("seed=0", "seed=1")})


def test_a_declared_check_that_breaks_on_its_input_is_one_line(monkeypatch):
    """A study's check (tools.replay.declared_checks) that meets a damaged or old-format file is one problem line
    naming the check, not a traceback; a check's own problems pass through."""
    from tools import replay

    def damaged(root):
        return {}["sets"]

    def fine(root):
        return ["docs/results/x.json: read from other records: rerun python -m studies.x"]

    monkeypatch.setattr(replay, "declared_checks", lambda: [damaged, fine])
    assert check_docs.declared_checks() == [
        f"{__name__}.damaged: KeyError: 'sets'",
        "docs/results/x.json: read from other records: rerun python -m studies.x",
    ]
