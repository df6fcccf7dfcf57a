"""Long-term dependencies: the binary-partition graph, long ListOps, lazy graphs, the length tool."""

import json
import math
import random
import statistics

import datasets
import pytest
import torch

from data import listops
from data.graph_dataset import GraphDataset
from data.graphs import FROM_CHILD, FROM_LEFT, FROM_RIGHT, SELF, GraphConstruction, bpt_edges, bpt_spans
from data.listops import describe_example
from data.splits import load_splits, with_defaults
from data.vocab import Vocab
from tests.conftest import assert_breakdowns_match_test_acc, compose_config, rescored_test_acc, run_script


def senders(n, k, i):
    src, dst, _, _ = bpt_edges(n, k, self_loops=False)
    return sorted(src[dst == i].tolist())


# ---- the binary partition, worked by hand ---------------------------------------------------------
def test_bpt_spans_of_8_and_13_tokens():
    assert bpt_spans(8) == [(0, 2), (2, 4), (4, 6), (6, 8), (0, 4), (4, 8), (0, 8)]
    # 13 = 8 + 4 + 1: the lone token 12 is no span, and [8, 13) has children [8, 12) and token 12
    assert bpt_spans(13) == [
        (0, 2), (2, 4), (4, 6), (6, 8), (8, 10), (10, 12), (0, 4), (4, 8), (8, 12), (0, 8), (8, 13), (0, 13)
    ]  # fmt: skip
    assert bpt_spans(6) == [(0, 2), (2, 4), (4, 6), (0, 4), (0, 6)]  # [4, 6) at level 2 is the level-1 block
    assert bpt_spans(1) == [] and bpt_spans(2) == [(0, 2)]


def test_bpt_edges_of_8_tokens_by_hand():
    # nodes: tokens 0-7, then spans 8=[0,2) 9=[2,4) 10=[4,6) 11=[6,8) 12=[0,4) 13=[4,8) 14=[0,8)
    # token 0, k=1: token 1, then the level-1 block [2,4), then the level-2 block [4,8)
    assert senders(8, 1, 0) == [1, 9, 13]
    # token 5, k=1: left: token 4, block [2,4), then [0,2) (level 1 again: 2 is no level-2 boundary);
    # right: token 6, then token 7 (7 is no level-1 boundary) and the sequence ends
    assert senders(8, 1, 5) == [4, 6, 7, 8, 9]
    assert senders(8, 1, 13) == [4, 5, 6, 7]  # a span hears its tokens
    assert senders(8, 1, 14) == list(range(8))
    src, dst, etype, spans = bpt_edges(8, 1, self_loops=True)
    assert spans == 7 and (src == dst).sum() == 15
    types = {(s, d): t for s, d, t in zip(src.tolist(), dst.tolist(), etype.tolist())}
    assert types[(4, 13)] == FROM_CHILD and types[(9, 5)] == FROM_LEFT and types[(7, 5)] == FROM_RIGHT
    assert types[(13, 13)] == SELF


def test_bpt_edges_of_13_tokens_by_hand():
    # spans: 13=[0,2) 14=[2,4) 15=[4,6) 16=[6,8) 17=[8,10) 18=[10,12) 19=[0,4) 20=[4,8) 21=[8,12)
    #        22=[0,8) 23=[8,13) 24=[0,13)
    # token 12, k=2: tokens 10, 11; level 1: [8,10), [6,8); 6 is no level-2 boundary: [4,6); level 2: [0,4)
    assert senders(13, 2, 12) == [10, 11, 15, 16, 17, 19]
    # token 0, k=2: tokens 1, 2; 3 is odd: token 3; level 1: [4,6), [6,8); level 2: [8,12); then token 12
    # (the level-2 block of 12 is the token itself)
    assert senders(13, 2, 0) == [1, 2, 3, 12, 15, 16, 21]
    assert senders(13, 2, 23) == [8, 9, 10, 11, 12]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 31, 64, 100, 257])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_every_token_hears_every_other_token_exactly_once(n, k):
    """The contextual senders of a token cover the rest of the sequence with no gap and no overlap."""
    spans = bpt_spans(n)
    assert len(spans) == max(n - 1, 0)  # a full binary tree over n leaves
    cover = {i: (i, i + 1) for i in range(n)} | {n + s: span for s, span in enumerate(spans)}
    src, dst, _, _ = bpt_edges(n, k, self_loops=False)
    for i in range(n):
        heard = [t for s in src[dst == i].tolist() for t in range(*cover[s])]
        assert sorted(heard) == [t for t in range(n) if t != i]


def test_bpt_has_n_log_n_edges_not_n_squared():
    k = 4
    per_token = {n: bpt_edges(n, k, self_loops=False)[0].numel() / n for n in (100, 1000, 2000)}
    for n, e in per_token.items():  # per level: <= k + 1 senders on each side, and one span to feed
        assert e <= (2 * (k + 1) + 1) * math.log2(n) + 2 * k, n
    assert per_token[2000] / per_token[1000] < 1.2  # the complete graph's doubles
    assert bpt_edges(2000, k)[0].numel() < 2000**2 / 20


def test_bpt_graph_has_span_nodes_read_at_the_root():
    g = GraphConstruction(name="bpt", k=2, phrase_id=3)(list(range(4, 17)))  # 13 tokens
    assert g.num_nodes() == 25
    assert (g.ndata["pos"][13:] == -1).all() and (g.ndata["tok"][13:] == 3).all()
    assert g.ndata["root"].nonzero().flatten().tolist() == [24]
    g = GraphConstruction(name="bpt", cls_id=2)(list(range(4, 12)))
    assert g.num_nodes() == 16 and g.in_degrees(15) == 16  # <cls> hears tokens and spans, and itself
    with pytest.raises(ValueError, match="not defined on graph=bpt's span nodes"):
        GraphConstruction(name="bpt", pe="lap_pe")


# ---- long ListOps ---------------------------------------------------------------------------------
def test_budget_sampler_makes_the_same_draws_as_the_recipe():
    from data.listops import _budget_tokens, _random_tree, _tree_tokens

    a, b = random.Random(5), random.Random(5)
    for _ in range(300):
        assert _budget_tokens(b, 10, 0.25, 10, False, 10**9) == _tree_tokens(_random_tree(a, 1, 10, 0.25, 10, False))


def test_budget_sampler_keeps_the_length_distribution():
    """Abandoning over-long draws early and forcing an operator root condition on the same event as
    rejection: lengths and root operators of the two samplers agree (2,000 draws each)."""
    kw = dict(min_length=30, max_length=120, max_depth=10, max_args=10)
    runs = {s: list(listops.generate(2000, seed=3, sampler=s, **kw)) for s in listops.SAMPLERS}
    lengths = {s: [len(e["tokens"]) for e in exs] for s, exs in runs.items()}
    assert abs(statistics.mean(lengths["reject"]) - statistics.mean(lengths["budget"])) < 3  # sd ~25, se ~0.8
    for op in listops.OPERATORS:
        shares = [sum(e["tokens"][0] == op for e in exs) / len(exs) for exs in runs.values()]
        assert abs(shares[0] - shares[1]) < 0.05
    with pytest.raises(listops.ListOpsError, match="valid samplers: reject, budget"):
        next(listops.generate(1, sampler="fast"))
    with pytest.raises(listops.ListOpsError, match="could only make 0"):  # no operator can stand at depth 1 of 1
        list(listops.generate(2, min_length=3, max_length=20, max_depth=1, sampler="budget"))
    with pytest.raises(listops.ListOpsError, match="dataset.min_length=501 is above dataset.max_length=40"):
        next(listops.generate(1, min_length=501, max_length=40))


def test_long_dataset_config_is_the_lra_recipe(tmp_path):
    cfg = compose_config(["dataset=listops_long", "dataset.num_train=20", "dataset.num_val=5", "dataset.num_test=5"])
    assert (cfg.dataset.max_depth, cfg.dataset.max_args, cfg.dataset.min_length, cfg.dataset.max_length) == (
        10, 10, 501, 1999
    )  # fmt: skip
    splits = load_splits(cfg.dataset, progress=False)
    lengths = [n for ds in splits.values() for n in ds["length"]]
    assert len(lengths) == 30 and min(lengths) >= 501 and max(lengths) <= 1999
    assert max(d for ds in splits.values() for d in ds["depth"]) <= 9  # depth 10 is a digit


def test_long_command_line_writes_the_lra_layout(tmp_path):
    out = tmp_path / "long.tsv"
    assert listops.main(["--preset", "long", "--num", "8", "--out", str(out)]) == 0
    assert out.read_text().startswith("Source\tTarget\n")
    rows = listops.read_tsv(out)
    assert len(rows) == 8 and all(501 <= len(r["tokens"]) <= 1999 for r in rows)
    assert listops.main(["--preset", "long", "--num", "3", "--max-length", "700", "--out", str(out)]) == 0
    assert all(len(r["tokens"]) <= 700 for r in listops.read_tsv(out))


def test_an_old_checkpoint_config_resumes_under_the_new_keys():
    old = {"name": "listops", "num_train": 9, "max_length": 100, "min_length": 1, "root_operator": False, "seed": 0}
    new = {**old, "shuffle": True, "sampler": "reject"}
    assert with_defaults(old) == with_defaults(new)
    assert with_defaults({k: v for k, v in old.items() if k != "root_operator"}) != with_defaults(new)


# ---- lazy graphs, the length tool, a long run end to end ------------------------------------------
def test_lazy_graphs_equal_built_ones():
    rows = list(
        listops.generate(12, seed=1, min_length=40, max_length=300, max_depth=10, max_args=10, sampler="budget")
    )
    ds = datasets.Dataset.from_list(rows).map(describe_example)
    vocab = Vocab.build([r["tokens"] for r in rows])
    for name in ("complete", "bpt", "tree"):
        construction = GraphConstruction(name=name)
        built, lazy = GraphDataset(ds, vocab, construction), GraphDataset(ds, vocab, construction, lazy=True)
        assert lazy.graphs is None and lazy.sizes == [len(r["tokens"]) for r in rows]
        for i in (0, 5, 11):
            a, b = built[i][0], lazy[i][0]
            assert torch.equal(torch.stack(a.edges()), torch.stack(b.edges()))
            assert torch.equal(a.ndata["tok"], b.ndata["tok"])


def test_token_batches_keep_to_their_budgets():
    from studies.long_range import token_batches

    lengths = [random.Random(i).randrange(1, 2000) for i in range(300)]
    batches = token_batches(lengths, tokens=4096, pairs=2**22)
    assert sorted(i for b in batches for i in b) == list(range(300))
    for b in batches:
        n = max(lengths[i] for i in b)
        assert len(b) == 1 or (len(b) * n <= 4096 and len(b) * n * n <= 2**22)


def test_a_tiny_long_run_trains_evaluates_and_is_scored_by_length(tmp_path):
    run = tmp_path / "run"
    run_script(
        "train.py",
        "dataset=listops_long",
        "dataset.num_train=24",
        "dataset.num_val=4",
        "dataset.num_test=4",
        "dataset.min_length=101",
        "dataset.max_length=300",
        "model=transformer",
        "graph=bpt",
        "model.num_layers=2",
        "model.hidden_dim=16",
        "trainer.max_epochs=1",
        "trainer.batch_size=8",
        "trainer.progress=false",
        "logger=none",
        f"hydra.run.dir={run}",
    )
    from studies import long_range

    out = tmp_path / "lengths.md"
    args = [str(run), "--num", "4", "--exclude-pool", "50", "--data-dir", str(tmp_path / "sets")]
    assert long_range.main(args + ["--out", str(out), "--plot", str(tmp_path / "l.png")]) == 0
    text = out.read_text()
    assert "| transformer / bpt (trained with 2-10 arguments) |" in text and "LRA 501-1999" in text
    scored = (run / "long_range.json").read_text()
    assert '"LRA 501-1999"' in scored and (tmp_path / "l.png").stat().st_size > 1000
    assert long_range.main([str(tmp_path / "nothing")]) == 2
    # the table is drawn again from the JSON written beside it, as tools.check_docs replays it
    data = json.loads((tmp_path / "lengths.json").read_text())
    assert long_range.markdown(data) == text and len((tmp_path / "lengths.json").read_bytes()) < 4000
    (run_data,) = data["runs"]
    assert run_data["model"] == "transformer" and set(run_data["sets"]) == {
        "own test 1-100",
        "LRA 1-100",
        "LRA 101-500",
        "LRA 501-1999",
    }
    run_data["sets"]["LRA 501-1999"]["accuracy"] += 0.5
    assert long_range.markdown(data) != text


def test_check_docs_replays_long_range_lengths_from_its_json_and_names_a_hand_edit(tmp_path):
    from studies import long_range
    from tools import replay

    runs = [
        {"model": "transformer", "cell": None, "graph": g, "seed": 0, "train_args": 5, "sets": sets}
        for g, sets in (
            ("complete", {"own test 1-100": {"accuracy": 0.577, "num_examples": 10}}),
            ("bpt", {"own test 1-100": {"accuracy": 0.587, "num_examples": 10}}),
        )
    ]
    data = {"command": "python -m studies.long_range x", "scoring_seconds": 12.0, "wall_seconds": 3.0, "runs": runs}
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "long_range_lengths.json").write_text(json.dumps(data))
    page = tmp_path / "docs" / "results" / "long_range_lengths.md"
    page.write_text(long_range.markdown(data))
    (table,) = [t for t in replay.tables(tmp_path) if t.table == "docs/results/long_range_lengths.md"]
    assert replay.compare(tmp_path, table) == []
    page.write_text(page.read_text().replace("| 0.587 |", "| 0.597 |"))
    (problem,) = replay.compare(tmp_path, table)
    assert problem.startswith("docs/results/long_range_lengths.md:10: has '| transformer / bpt | 0.597 |")
    (tmp_path / "docs" / "results" / "long_range_lengths.json").unlink()  # a lost source: one line, no crash
    assert replay.compare(tmp_path, table) == [
        "docs/results/long_range_lengths.md: its source docs/results/long_range_lengths.json is missing; "
        "studies.long_range.markdown draws it from that"
    ]


def test_a_checkout_with_fewer_runs_keeps_the_committed_length_table(tmp_path, monkeypatch):
    """Scoring a folder of fewer runs than the committed JSON beside --out holds would write them over with fewer:
    it stops with one line naming the fix, before the LRA sets are made or anything is written; as many runs
    as the JSON holds go on as before."""
    from studies import long_range

    class Scored(Exception):
        pass

    def make_sets(*a, **k):
        raise Scored

    monkeypatch.setattr(long_range, "make_sets", make_sets)
    out = tmp_path / "out"
    out.mkdir()
    committed = out / "long_range_lengths.json"
    committed.write_text(json.dumps({"command": "x", "runs": [{"graph": "complete"}, {"graph": "bpt"}]}))
    before = committed.read_bytes()
    runs = tmp_path / "runs"
    for name in ("graph=complete,seed=0", "graph=bpt,seed=0"):
        (runs / name / "checkpoints").mkdir(parents=True)
        (runs / name / "checkpoints" / "best.pt").write_bytes(b"")
        (runs / name / "results.json").write_text("{}")
    (runs / "graph=bpt,seed=0" / "results.json").unlink()  # unfinished: 1 run of the committed 2
    for where in (tmp_path / "nowhere", runs):  # missing, and a folder of fewer runs
        with pytest.raises(SystemExit, match=r"holds [01] runs, .*long_range_lengths.json 2: .*check_docs --render"):
            long_range.main([str(where), "--out", str(out / "long_range_lengths.md")])
    assert committed.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["long_range_lengths.json"]
    (runs / "graph=bpt,seed=0" / "results.json").write_text("{}")  # both: on to scoring
    with pytest.raises(Scored):
        long_range.main([str(runs), "--out", str(out / "long_range_lengths.md")])


def test_the_chance_table_names_each_sets_most_frequent_answer_and_is_replayed(tmp_path):
    from studies import long_range
    from studies.long_range import chance
    from tools import replay

    assert chance.counts([3, 3, 9]) == {str(k): (2 if k == 3 else 1 if k == 9 else 0) for k in range(10)}
    assert long_range.majority({"0": 2, "1": 3, "9": 3}) == ("1", 0.375)  # a tie goes to the smaller label
    labels = {str(k): v for k, v in enumerate([174, 85, 81, 81, 98, 85, 74, 65, 86, 171])}
    data = {
        "command": "python -m studies.long_range.chance",
        "sets": [{"set": "long_train test", "made_by": "m", "labels": labels, "checked": "c"}],
    }
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    (results / "long_range_chance.json").write_text(json.dumps(data))
    page = results / "long_range_chance.md"
    page.write_text(long_range.chance_markdown(data))
    assert "| long_train test | 1000 | 0 | 0.174 | 174 · 85 ·" in page.read_text()
    (table,) = [t for t in replay.tables(tmp_path) if t.table == "docs/results/long_range_chance.md"]
    assert replay.compare(tmp_path, table) == []
    page.write_text(page.read_text().replace("| 0.174 |", "| 0.184 |"))
    (problem,) = replay.compare(tmp_path, table)
    assert "0.184" in problem


def test_a_set_made_again_that_is_not_the_one_scored_stops_the_chance_tool():
    from studies.long_range import chance

    assert chance._check("s", {"a": 1}, {"a": 1}, "src") == "src: a 1"
    with pytest.raises(SystemExit, match="not the set scored"):
        chance._check("s", {"a": 1}, {"a": 2}, "src")


def test_the_chance_tool_refuses_to_check_against_no_records(tmp_path, monkeypatch):
    from studies.long_range import chance

    split = {"group": ["[MAX"], "length": [600], "label": [0]}
    monkeypatch.setattr(chance, "long_train_splits", lambda root: {"train": split, "val": split, "test": split})
    (tmp_path / chance.LONG_TRAIN_RECORDS).parent.mkdir(parents=True)
    (tmp_path / chance.LONG_TRAIN_RECORDS).write_text("")
    with pytest.raises(
        ValueError, match=r"no records with test_by_root and test_by_length .* \(make experiment E=long_train\)"
    ):
        chance.long_train_sets(tmp_path)


def test_the_essay_test_set_is_checked_example_by_example_against_its_records(tmp_path, monkeypatch):
    import datasets

    from data.graph_dataset import split_fingerprint
    from studies import long_range
    from studies.long_range import chance

    test = datasets.Dataset.from_dict({"tokens": [["[MAX", "2", "3", "]"], ["4"], ["9"]], "label": [3, 4, 9]})
    monkeypatch.setattr(chance, "experiment_splits", lambda root, experiment: {"test": test})
    records = tmp_path / chance.ESSAY_RECORDS
    records.parent.mkdir(parents=True)
    records.write_text(json.dumps({"test_acc": 0.5}) + "\n")  # a record without predictions checks nothing
    with pytest.raises(
        ValueError, match=r"no records with test predictions .*\(make experiment E=graph_choice_depth\)"
    ):
        chance.essay_sets(tmp_path)
    scored = {"n": 3, "fingerprint": split_fingerprint(test["tokens"], test["label"]), "correct": "oA=="}
    records.write_text(json.dumps({"test_predictions": scored}) + "\n")
    (made,) = chance.essay_sets(tmp_path)
    assert made["labels"] == {str(k): int(k in (3, 4, 9)) for k in range(10)}
    assert scored["fingerprint"] in made["checked"] and "(1 records)" in made["checked"]
    # right on the 3 and the 9 (0b101, "oA=="): two labels, so not one label's answer
    fingerprint = scored["fingerprint"]
    read = made["one_label"].pop("read")  # what was read, fingerprinted (the stale check below)
    assert made["one_label"] == {"fingerprint": fingerprint, "records": 1, "distinct": 1, "runs": [], "counts": {}}
    fours = {"n": 3, "fingerprint": scored["fingerprint"], "correct": "QA=="}  # 0b010: right on the 4 only
    other_set = dict(fours, fingerprint="f" * 16)  # another split's record is not read
    (tmp_path / long_range.RUNS / "training.jsonl").write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "overrides": ["experiment=training", "model.norm=post", "seed=1"],
                    "test_acc": 1 / 3,
                    "test_predictions": fours,
                },
                {"test_predictions": other_set},
                {"test_acc": 0.5},
            ]
        )
        + "\n"
    )
    (made,) = chance.essay_sets(tmp_path)
    run = {"experiment": "training", "run": "model.norm=post seed=1", "label": 4, "test_acc": 1 / 3}
    assert made["one_label"]["read"] != read  # another record read: another fingerprint of the reading
    expected = {"fingerprint": fingerprint, "records": 2, "distinct": 2, "runs": [run], "counts": {"training": 1}}
    assert {k: v for k, v in made["one_label"].items() if k != "read"} == expected
    (tmp_path / long_range.CHANCE_JSON).write_text(json.dumps({"sets": [made]}))
    assert long_range.chance_is_current(tmp_path) == []  # read from the records that are there
    from tools import replay

    assert long_range.chance_is_current in replay.declared_checks()  # what tools.check_docs runs
    post = {"overrides": ["experiment=training", "model.norm=post", "seed=1"], "test_acc": 1 / 3}
    replaced = dict(post, test_predictions=dict(fours, correct="IA=="))  # the run again, right on the 9 instead
    (tmp_path / long_range.RUNS / "training.jsonl").write_text(json.dumps(replaced) + "\n")
    (problem,) = long_range.chance_is_current(tmp_path)  # as many records as before, but not the ones read
    assert problem == (
        "docs/results/long_range_chance.json: essay suite test's one-label runs were read from other records than "
        "the 2 docs/results/runs now holds on that split (gathered, replaced or removed since; 2 read): rerun "
        "python -m studies.long_range.chance"
    )
    # one run recorded under two experiments' names (tools.share) is listed once, and counted once
    shared = dict(post, test_predictions=fours)
    (tmp_path / long_range.RUNS / "training.jsonl").write_text(json.dumps(shared) + "\n")
    (tmp_path / long_range.RUNS / "training_copy.jsonl").write_text(json.dumps(shared) + "\n")
    (made,) = chance.essay_sets(tmp_path)
    assert made["one_label"]["records"] == 3 and made["one_label"]["distinct"] == 2
    assert made["one_label"]["runs"] == [dict(run, experiment="training, training_copy")]
    (tmp_path / long_range.RUNS / "training_copy.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match=r"training_copy.jsonl:1: not a JSON record .*: gather it again"):
        chance.essay_sets(tmp_path)
    (tmp_path / long_range.RUNS / "training_copy.jsonl").unlink()
    (tmp_path / long_range.RUNS / "training.jsonl").write_text(json.dumps(dict(post, test_predictions=fours)) + "\n")
    (made,) = chance.essay_sets(tmp_path)
    page = "\n".join(long_range.one_label_markdown("essay suite test", made["one_label"]))
    assert "Of the 2 recorded runs" in page and "| training | model.norm=post seed=1 | 4 | 0.3333 |" in page
    (tmp_path / long_range.RUNS / "training.jsonl").unlink()
    reordered = test.select([1, 0, 2])  # the same examples in another order are another split
    monkeypatch.setattr(chance, "experiment_splits", lambda root, experiment: {"test": reordered})
    with pytest.raises(SystemExit, match="not the set scored"):
        chance.essay_sets(tmp_path)
    other = dict(scored, fingerprint="0" * 16)  # records that scored two test sets cannot check one
    records.write_text(json.dumps({"test_predictions": scored}) + "\n" + json.dumps({"test_predictions": other}) + "\n")
    with pytest.raises(ValueError, match="2 different test sets"):
        chance.essay_sets(tmp_path)


# ---- will it fit? ---------------------------------------------------------------------------------
def test_a_run_too_big_for_memory_stops_with_one_line(monkeypatch, tmp_path):
    from engine import memory
    from engine.config import check_config
    from train import run

    cfg = compose_config(
        ["dataset=listops_long", "dataset.num_train=6", "dataset.num_val=2", "dataset.num_test=2", "model=transformer",
         "graph=complete", "trainer.batch_size=6", "logger=none", "trainer.progress=false"]
    )  # fmt: skip
    monkeypatch.setattr(memory, "free_bytes", lambda device: 1.5 * 2**30)  # a machine with 1.5 GiB free
    with pytest.raises(
        ValueError,
        match=r"needs about .* GiB .* but 1.5 GiB are free: lower trainer.batch_size \(now 6; at most \d fit\)",
    ):
        run(cfg, tmp_path)  # before any graph is built or model trained
    assert not list((tmp_path / "checkpoints").iterdir())
    monkeypatch.setattr(memory, "free_bytes", lambda device: 2**28)  # not even one sentence fits
    with pytest.raises(ValueError, match=r"0.2 GiB are free: lower dataset.max_length \(now 1999\)"):
        run(cfg, tmp_path)
    monkeypatch.setattr(memory, "free_bytes", lambda device: None)  # unknown: nothing refused
    cpu = (torch.device("cpu"),) * 2
    lengths = {"train": [1999] * 6, "val": [1999], "test": [1999]}
    plan = memory.memory_plan(check_config(cfg), GraphConstruction(name="complete"), lengths, cpu)
    assert plan == dict.fromkeys(lengths, False)


def test_the_dense_path_is_foreseen_as_the_model_chooses_it():
    import dataclasses

    from engine.memory import runs_dense
    from models import model_config

    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    bpt = GraphConstruction(name="bpt")
    model = model_config(compose_config(["model=transformer"]).model)  # impl auto, dense_min_density 0.07
    assert runs_dense(model, GraphConstruction(name="complete"), 500, (cpu, cpu))
    assert not runs_dense(model, bpt, 1000, (cpu, cpu))  # 69 edges per token: sparse
    assert runs_dense(model, bpt, 1000, (gpu, cpu))  # DGL's CPU wheel and a GPU: only the dense path can run
    sparse = dataclasses.replace(model, impl="sparse")
    assert not runs_dense(sparse, GraphConstruction(name="complete"), 500, (cpu, cpu))
    assert not runs_dense(model_config(compose_config(["model=treelstm"]).model), bpt, 1000, (gpu, cpu))


def test_a_split_too_big_to_hold_builds_its_graphs_per_batch(monkeypatch, tmp_path, tiny_overrides):
    """A lazy split (graphs built batch by batch) trains, evaluates and resumes like a held one."""
    from engine import memory
    from train import run

    monkeypatch.setattr(memory, "HELD_SHARE", 0.0)  # every split is "too big"
    cfg = compose_config(tiny_overrides + ["graph=bpt", "trainer.max_epochs=1"])
    results = run(cfg, tmp_path)
    assert results["num_examples"] == {"train": 256, "val": 64, "test": 64}
    assert results["train_seconds"] > 0 and (tmp_path / "checkpoints" / "best.pt").is_file()
    assert_breakdowns_match_test_acc(results)
    # evaluate.py builds the test split's graphs up front: the lazy split scored exactly as a held one
    assert rescored_test_acc(tmp_path, tmp_path / "eval") == results["test_acc"]


@pytest.mark.parametrize("graph, impl", [("bpt", "sparse"), ("complete", "sparse"), ("complete", "dense, masked")])
def test_the_memory_estimate_covers_a_measured_step(graph, impl):
    """The estimate is an upper envelope of the peak one training step really takes (bench/scaling.py's
    meter: Linux peak resident memory), and not wildly above it."""
    from bench.scaling import Meter, make_batch, measure, model_config, rss_peak_supported
    from engine.memory import estimate_bytes
    from models.encoder import build_model
    from models.registry import model_config as typed

    if not rss_peak_supported():
        pytest.skip("peak memory is read from /proc (Linux)")
    n, batch = 384, 8
    g, labels, construction = make_batch(graph, impl, n, batch, k=4, window=2, seed=0)
    cfg = model_config("transformer")
    cfg["impl"], cfg["readout"] = impl.split(",")[0], "mean"
    torch.manual_seed(0)
    model = build_model(cfg, 20, 10, construction).train()
    _, peak, _ = measure(model, g, labels, Meter(torch.device("cpu")), 1)
    estimate = estimate_bytes(typed(cfg), GraphConstruction(name=graph), n, batch, impl.split(",")[0])
    assert peak <= estimate <= 8 * peak, (peak / 2**20, estimate / 2**20)
