"""tools.verdicts: every comparison the prose pages (listops, long_range, real_sentences) state is
``tools.stats.compare`` on its two cells, read from the committed records; the committed JSON is what they give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import replay, verdicts
from tools.stats import NOT_JUDGED, Cell, compare

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data():
    return verdicts.load(ROOT)


@pytest.fixture(scope="module")
def committed():
    return json.loads((ROOT / "docs/results/verdicts.json").read_text())


@pytest.fixture(scope="module")
def fresh(data):
    """What the tool makes of the committed records now (the committed JSON must equal it: the first test)."""
    return json.loads(json.dumps(verdicts.compute(data)))


def seeds_of(experiment: str, overrides: str) -> tuple[list[float], int]:
    """The test accuracies of one cell's seeds and its test size, read from the records here, not by the tool."""
    want = set(overrides.split("; "))
    accs, sizes = [], set()
    for line in (ROOT / f"docs/results/runs/{experiment}.jsonl").read_text().splitlines():
        r = json.loads(line)
        if {o for o in r["overrides"] if not o.startswith(("experiment=", "seed="))} == want:
            accs.append(r["test_acc"])
            sizes.add(sum(b["n"] for b in r["test_by_length"].values()))
    assert len(sizes) == 1
    return accs, sizes.pop()


def test_the_committed_json_is_what_the_records_give(data, committed):
    assert json.loads(json.dumps(verdicts.compute(data))) == committed


def predictions_of(experiment: str, overrides: str):
    """A cell's (seeds, N) right/wrong matrix when every run kept its test predictions (one split), else None."""
    import numpy as np

    from engine.predictions import decode_correct

    want = set(overrides.split("; "))
    rows, prints = [], set()
    for line in (ROOT / f"docs/results/runs/{experiment}.jsonl").read_text().splitlines():
        r = json.loads(line)
        if {o for o in r["overrides"] if not o.startswith(("experiment=", "seed="))} == want:
            if not r.get("test_predictions"):
                return None
            rows.append(decode_correct(r["test_predictions"]))
            prints.add(r["test_predictions"]["fingerprint"])
    return np.stack(rows) if len(prints) == 1 else None


def test_each_row_is_compare_on_its_two_cells(fresh):
    checked = 0
    for c in verdicts.COMPARISONS:
        if (
            not isinstance(c, verdicts.Comparison)
            or not all(isinstance(x, verdicts.Records) for x in (c.a, c.b))
            or c.a.part
        ):
            continue  # slices of the test set and other files' cells: the tests below
        (a, na), (b, nb) = seeds_of(c.a.experiment, c.a.overrides), seeds_of(c.b.experiment, c.b.overrides)
        kept_a, kept_b = predictions_of(c.a.experiment, c.a.overrides), predictions_of(c.b.experiment, c.b.overrides)
        if c.a.paired and c.b.paired and kept_a is not None and kept_b is not None:  # every run kept its predictions
            v = compare(Cell(a, correct=kept_a, fingerprint="f"), Cell(b, correct=kept_b, fingerprint="f"))
            assert v.rule == "paired"
        else:
            v = compare(Cell(a, n=na), Cell(b, n=nb))
        row = fresh["pages"][c.page][c.name]
        assert (row["diff"], row["noise"], row["verdict"], row["rule"]) == (v.diff, v.noise, v.verdict, v.rule), c.name
        assert (row["a"]["k"], row["b"]["k"], row["a"]["n"], row["b"]["n"]) == (len(a), len(b), na, nb)
        checked += 1
    assert checked >= 30


def slice_of(experiment: str, overrides: str, root: str) -> tuple[list[float], int]:
    """One cell's accuracies on the test examples of one root operator, and how many there are, read here."""
    want = set(overrides.split("; "))
    accs, sizes = [], set()
    for line in (ROOT / f"docs/results/runs/{experiment}.jsonl").read_text().splitlines():
        r = json.loads(line)
        if {o for o in r["overrides"] if not o.startswith(("experiment=", "seed="))} == want:
            accs.append(r["test_by_root"][root]["acc"])
            sizes.add(r["test_by_root"][root]["n"])
    assert len(sizes) == 1
    return accs, sizes.pop()


def test_a_slice_of_the_test_set_is_judged_unpaired_on_its_own_examples(data, fresh):
    checked = 0
    for c in verdicts.COMPARISONS:
        if not isinstance(c, verdicts.Comparison) or not isinstance(c.a, verdicts.Records) or not c.a.part:
            continue
        root = c.a.part.removeprefix("root=")
        (a, na), (b, nb) = (slice_of(s.experiment, s.overrides, root) for s in (c.a, c.b))
        v = compare(Cell(a, n=na), Cell(b, n=nb))
        row = fresh["pages"][c.page][c.name]
        assert (row["diff"], row["noise"], row["verdict"], row["rule"]) == (v.diff, v.noise, v.verdict, "unpaired")
        assert row["a"]["n"] == na < 10_000 and root in row["a"]["cell"]
        checked += 1
    assert checked == 6
    with pytest.raises(ValueError, match="no test_by_root entry '\\[XOR'"):
        verdicts.Records("aggregation", "graph=tree; model=max", part="root=[XOR").cell(data)


def test_one_seed_a_side_is_not_judged_and_a_single_seed_borrows_the_other_cells_spread(fresh):
    listops = fresh["pages"]["listops"]
    for name in ("gat: tree - complete", "complete: gat - gcn", "tree: transformer - gcn", "window: gat - gcn"):
        row = listops[name]
        assert (row["a"]["k"], row["b"]["k"], row["verdict"], row["noise"], row["rule"]) == (1, 1, NOT_JUDGED, None, "")
    # the Transformer's tree (1 seed) against its complete graph (3 seeds): judged, with the 3 seeds' spread
    row = listops["transformer: tree - complete"]
    assert (row["a"]["k"], row["b"]["k"], row["rule"]) == (1, 3, "unpaired") and row["noise"] > 0
    # ListOps' test: 10,000 expressions, read from the records
    assert row["a"]["n"] == row["b"]["n"] == 10_000


def test_long_range_cells_read_the_lengths_table_and_its_set_sizes(data, fresh):
    from studies import long_range

    lengths = json.loads((ROOT / "docs/results/long_range_lengths.json").read_text())
    arity = verdicts.Lengths("treelstm binary / binary_tree (trained with 2-10 arguments)", "LRA 1-100").cell(data)
    runs = [r for r in lengths["runs"] if long_range.label(r) == arity_row()]
    assert arity.accs == [r["sets"]["LRA 1-100"]["accuracy"] for r in runs] and arity.n == 975
    row = fresh["pages"]["long_range"]["deep sets: own test - LRA 1-100"]
    assert (row["a"]["n"], row["b"]["n"], row["a"]["k"]) == (10_000, 1_000, 2)
    ours = verdicts.Lengths("recursive deepsets / tree", "own test 1-100").cell(data)
    lra = verdicts.Lengths("recursive deepsets / tree", "LRA 1-100").cell(data)
    assert row["verdict"] == compare(ours, lra).verdict == "A higher"


def lengths_seeds(row: str, test_set: str) -> tuple[list[float], int]:
    """One row of the lengths table on one test set, read from its JSON here, not by the tool: accuracies, N."""
    from studies import long_range

    runs = json.loads((ROOT / "docs/results/long_range_lengths.json").read_text())["runs"]
    sets = [r["sets"][test_set] for r in runs if long_range.label(r) == row]
    assert len({s["num_examples"] for s in sets}) == 1
    return [s["accuracy"] for s in sets], sets[0]["num_examples"]


def arity_row() -> str:
    return "treelstm binary / binary_tree (trained with 2-10 arguments)"


def test_a_family_counts_the_findings_of_its_pairs(data, fresh):
    fam = next(c for c in verdicts.COMPARISONS if isinstance(c, verdicts.Family) and c.name.startswith("sst:"))
    assert len(fam.pairs) == 17 * 16 // 2  # every pair of SST-5's 17 cells
    found = [compare(a.cell(data), b.cell(data)) for a, b in fam.pairs]
    row = fresh["pages"]["real_sentences"][fam.name]
    assert row["pairs"] == len(found) and row["findings"] == sum(v.finding for v in found)


def test_check_docs_replays_the_table_and_says_when_the_json_is_stale(committed):
    table = next(t for t in replay.tables(ROOT) if t.table == "docs/results/verdicts.md")
    assert table.sources[0] == "docs/results/verdicts.json" and set(verdicts.sources()) <= set(table.sources)
    assert replay.compare(ROOT, table) == []
    text = (ROOT / "docs/results/verdicts.md").read_text()
    assert "[docs/statistics.md](../statistics.md)" in text and "| unpaired |" in text
    stale = json.loads(json.dumps(committed))
    stale["pages"]["listops"]["complete: gat - gcn"]["verdict"] = "A higher"  # a verdict edited by hand
    records = verdicts.load(ROOT)
    assert verdicts.replay(stale, *records.values()).startswith(verdicts.STALE)
    assert verdicts.replay(committed, *records.values()) == text


def test_pretrained_cells_read_the_finished_runs_of_pretrained_graphs(data, fresh):
    runs = json.loads((ROOT / "docs/results/pretrained_graphs.json").read_text())["runs"]
    for ds, n in (("sst", 2210), ("sst_binary", 1821)):
        seeds = {
            r["settings"]["seed"]: r["test_acc"]
            for r in runs
            if r.get("finished")
            and r["settings"].keys() == {"dataset", "graph", "seed"}
            and (r["settings"]["dataset"], r["settings"]["graph"]) == (ds, "complete")
        }
        cell = verdicts.Pretrained(ds, "complete").cell(data)
        # the cell's seeds only: binary SST's learning-rate sweep put seed 0 at two more settings in the file
        assert sorted(seeds) == ["0", "1", "2"] and cell.accs == [seeds[s] for s in sorted(seeds)] and cell.n == n
        phrases, _ = seeds_of("sst_phrases", f"dataset.train_phrases=True; dataset={ds}; graph=complete")
        row = fresh["pages"]["sst_phrases"][f"{ds}: phrases - sentences, complete"]
        v = compare(Cell(phrases, n=n), cell)
        assert (row["diff"], row["noise"], row["verdict"], row["b"]["k"]) == (v.diff, v.noise, v.verdict, 3)
    with pytest.raises(ValueError, match="no finished run of sst with graph=nowhere"):
        verdicts.Pretrained("sst", "nowhere").cell(data)


def test_a_target_row_is_against_on_its_cell_and_the_goal_of_targets_json(fresh):
    from tools.stats import against

    goals = json.loads((ROOT / "docs/results/targets.json").read_text())
    checked = 0
    for t in verdicts.COMPARISONS:
        if not isinstance(t, verdicts.Target):
            continue
        if isinstance(t.cell, verdicts.Lengths):
            accs, n = lengths_seeds(t.cell.row, t.cell.test_set)
        else:
            accs, n = seeds_of(t.cell.experiment, t.cell.overrides)
        v = against(Cell(accs, n=n), goals[t.target]["target"])
        row = fresh["pages"][t.page][t.name]
        rule = "unpaired" if len(accs) > 1 else ""
        assert (row["diff"], row["noise"], row["verdict"], row["rule"]) == (v.diff, v.noise, v.verdict, rule)
        if len(accs) == 1:  # one seed against a goal: no spread of its own, not judged
            assert row["noise"] is None and row["said"] == "one seed: not judged"
        else:
            assert row["said"].startswith("met" if v.diff >= 0 else "missed") and ("within" in row["said"]) == (
                v.verdict == "no difference measurable here"
            )
        assert (row["a"]["k"], row["a"]["n"], row["target"]) == (len(accs), n, goals[t.target]["target"])
        checked += 1
    # the three GloVe targets, the published ListOps Transformer, TREC's CNN, Tai et al.'s randomly initialised
    # Tree-LSTM on both SST tasks, and long_range's goal on its two Tree-LSTM rows (the recipe's one seed, the
    # arity-trained three)
    assert checked == 9
    assert "docs/results/targets.json" in verdicts.sources()


def test_glove_against_scratch_pairs_the_same_cell_of_two_grids(fresh):
    for name, glove, scratch in (
        ("sst_binary: glove - scratch, every cell", "sst_binary_glove", "sst_binary"),
        ("sst5: glove - scratch, every cell", "sst5_glove", "sst"),
        ("trec: glove - scratch, every cell", "trec_glove", "trec"),
    ):
        fam = next(c for c in verdicts.COMPARISONS if isinstance(c, verdicts.Family) and c.name == name)
        assert all((a.experiment, b.experiment, a.overrides) == (glove, scratch, b.overrides) for a, b in fam.pairs)
        row = fresh["pages"]["real_sentences"][name]
        assert row["pairs"] == len(fam.pairs) == (13 if glove == "trec_glove" else 17)
        judged = [
            compare(Cell(a, n=na), Cell(b, n=nb))  # these grids kept no predictions: unpaired
            for (a, na), (b, nb) in (
                (seeds_of(x.experiment, x.overrides), seeds_of(y.experiment, y.overrides)) for x, y in fam.pairs
            )
        ]
        assert row["a_higher"] == sum(v.verdict == "A higher" for v in judged)
        assert row["smallest_gap"] == pytest.approx(min(abs(v.diff) for v in judged))
        assert row["largest_gap"] == pytest.approx(max(abs(v.diff) for v in judged))


def test_a_lengths_cell_against_a_records_cell_reads_each_from_its_own_file(data, fresh):
    """Trained short (long_range_lengths.json, LRA's 501-1999 set) against trained long (long_train's records, its
    own test set): two samples of one recipe, judged unpaired on each side's own set size."""
    for name, row_label, overrides in (
        (
            "501-1999: deep sets trained short - trained long",
            "recursive deepsets / tree",
            "graph=tree; model=recursive",
        ),
        (
            "501-1999: tree-lstm trained short with 2-10 arguments - trained long",
            "treelstm binary / binary_tree (trained with 2-10 arguments)",
            "graph=binary_tree; model.cell=binary; model=treelstm",
        ),
    ):
        short = verdicts.Lengths(row_label, "LRA 501-1999").cell(data)
        accs, n = seeds_of("long_train", overrides)
        v = compare(short, Cell(accs, n=n))
        row = fresh["pages"]["long_range"][name]
        assert (row["a"]["k"], row["b"]["k"], row["b"]["n"], row["rule"]) == (len(short.accs), len(accs), n, "unpaired")
        assert (row["diff"], row["noise"], row["verdict"]) == (v.diff, v.noise, v.verdict)
