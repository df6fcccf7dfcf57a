"""model=minilm through the training path (issue 24): the pipeline tokenises each sentence with the model's
WordPiece and lifts graph= to the pieces (data/wordpiece.py); train.py fine-tunes, evaluate.py rescored the
checkpoint. The data is a toy treebank written here (SST's format, gold trees), learnable from one word."""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.core.override_parser.overrides_parser import OverridesParser

import models
from data.graph_dataset import GraphDataset
from data.splits import load_splits
from data.vocab import Vocab
from models.registry import yaml_mapping
from tests.conftest import ROOT, compose_config, rescored_test_acc

NOUNS = ["movie", "film", "plot", "story", "acting", "cast", "script", "ending"]
GOOD = ["great", "wonderful", "good", "excellent", "lovely", "superb"]
BAD = ["awful", "terrible", "bad", "boring", "dreadful", "unwatchable"]  # unwatchable: several pieces


def tree_line(noun: str, adj: str, positive: bool) -> str:
    y = 4 if positive else 0
    return f"({y} (2 (2 the) (2 {noun})) ({y} (2 was) ({y} {adj})))"


@pytest.fixture(scope="module")
def toy_sst(tmp_path_factory):
    """train/dev/test.txt of SST trees "the NOUN was ADJ": positive or negative by the adjective alone."""
    folder = tmp_path_factory.mktemp("toy_sst")
    rng = random.Random(0)
    for name, n in (("train.txt", 96), ("dev.txt", 24), ("test.txt", 24)):
        lines = []
        for i in range(n):
            positive = i % 2 == 0
            lines.append(tree_line(rng.choice(NOUNS), rng.choice(GOOD if positive else BAD), positive))
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def overrides(toy_sst, tmp_path, *extra):
    return [
        "model=minilm",
        "dataset=sst_binary",
        f"dataset.data_dir={toy_sst}",
        f"dataset.cache_dir={tmp_path / 'cache'}",
        "optim.lr=1e-4",
        "optim.schedule=linear",
        "optim.warmup_ratio=0.1",
        "optim.min_lr_ratio=0.0",
        "trainer.batch_size=16",
        "trainer.eval_batch_size=32",
        "trainer.progress=false",
        "logger=none",
        *extra,
    ]


def train(args, timeout=600):
    return subprocess.run(
        [sys.executable, "train.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def trained(toy_sst, tmp_path_factory):
    """``python train.py model=minilm graph=complete`` on the toy treebank, 2 epochs of 6 steps."""
    tmp = tmp_path_factory.mktemp("minilm_run")
    run_dir = tmp / "run"
    res = train([*overrides(toy_sst, tmp, "graph=complete", "trainer.max_epochs=2"), f"hydra.run.dir={run_dir}"])
    assert res.returncode == 0, res.stderr[-2000:]
    return run_dir


def test_minilm_fine_tunes_on_the_training_path(trained):
    results = json.loads((trained / "results.json").read_text())
    assert results["model"] == "minilm" and results["graph"] == "complete"
    with open(trained / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2]
    assert float(rows[1]["train_loss"]) < float(rows[0]["train_loss"])  # learning
    # evaluation is deterministic, so the validation loss moves only if the weights did (lr 0: equal losses)
    assert float(rows[1]["val_loss"]) < float(rows[0]["val_loss"]) - 0.01, rows
    assert float(rows[0]["train_loss"]) < 0.69  # below chance (ln 2) within the first epoch's 6 steps
    assert results["best_val_acc"] >= 0.9 and results["test_acc"] >= 0.9, results  # one word decides the label


def test_checkpoint_round_trip_evaluates_to_the_same_accuracy(trained, tmp_path):
    results = json.loads((trained / "results.json").read_text())
    assert rescored_test_acc(trained, tmp_path / "eval") == results["test_acc"]
    ckpt = torch.load(trained / "checkpoints" / "best.pt", weights_only=True)
    assert ckpt["config"]["model"]["name"] == "minilm"
    assert "classifier.weight" in ckpt["model"] and "embeddings.word.weight" in ckpt["model"]


def test_resume_auto_goes_on_from_the_last_epoch(trained, toy_sst, tmp_path):
    """A finished run started again with trainer.resume=auto loads its last.pt and retrains nothing."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(trained, run_dir)
    args = overrides(toy_sst, trained.parent, "graph=complete", "trainer.max_epochs=2", "trainer.resume=auto")
    res = train([*args, f"hydra.run.dir={run_dir}"])
    assert res.returncode == 0, res.stderr[-2000:]
    assert "resuming from" in res.stderr + res.stdout or "resuming from" in (run_dir / "train.log").read_text()
    with open(run_dir / "metrics.csv") as f:
        assert [int(r["epoch"]) for r in csv.DictReader(f)] == [1, 2]  # nothing retrained


def test_step_zero_is_the_pretrained_encoder():
    """Before any step the fine-tuned model's node states are HF BertModel's (head aside), within 1e-5."""
    from transformers import BertModel, BertTokenizerFast

    from models.minilm import model_dir

    cfg = compose_config(["model=minilm", "graph=complete"])
    construction = models.make_construction(cfg.graph, Vocab.build([["x"]]), cfg.model)
    model = models.build_model(cfg.model, 1, 3, construction).eval()
    sentences = [["The", "weather", "is", "lovely", "today", "."], ["An", "unwatchable", ",", "dreadful", "film"]]
    g = __import__("dgl").batch([construction(words) for words in sentences])
    folder = str(model_dir())
    hf = BertModel.from_pretrained(folder, local_files_only=True, attn_implementation="eager").eval()
    tokenizer = BertTokenizerFast.from_pretrained(folder, local_files_only=True)
    enc = tokenizer(sentences, is_split_into_words=True, padding=True, return_tensors="pt")
    assert g.ndata["tok"].tolist() == enc["input_ids"][enc["attention_mask"].bool()].tolist()
    with torch.no_grad():
        ours = model.node_states(g)
        theirs = hf(**enc).last_hidden_state[enc["attention_mask"].bool()]
        logits = model(g)
    diff = (ours - theirs).abs().max().item()
    assert diff <= 1e-5, f"max |diff| {diff:.2e}"
    assert logits.shape == (2, 3)


@pytest.fixture(scope="module")
def toy_splits(toy_sst, tmp_path_factory):
    cfg = compose_config(["model=minilm", "dataset=sst_binary", f"dataset.data_dir={toy_sst}"])
    cfg.dataset.cache_dir = str(tmp_path_factory.mktemp("cache"))
    return cfg, load_splits(cfg.dataset, progress=False)


def piece_dataset(cfg, splits, graph):
    construction = models.make_construction({"name": graph}, Vocab.build(splits["train"]["tokens"]), cfg.model)
    return construction, GraphDataset(splits["test"], Vocab.build(splits["train"]["tokens"]), construction)


def first_with(splits, word):
    return next(i for i, toks in enumerate(splits["test"]["tokens"]) if word in toks)


def test_gold_tree_builds_on_pieces(toy_splits):
    """graph=tree on SST: [CLS] pieces [SEP], then one [MASK] node per phrase of the gold tree, linked both
    ways to its children's pieces and to nothing else but [CLS], [SEP] and itself."""
    cfg, splits = toy_splits
    construction, data = piece_dataset(cfg, splits, "tree")
    i = first_with(splits, "unwatchable")  # "the NOUN was unwatchable": 3 phrases (NP, VP, S)
    g = data.graphs[i]
    wordpiece = construction.wordpiece
    pieces = wordpiece.pieces(splits["test"]["tokens"][i])
    p = len(pieces)
    assert p == 2 + 3 + 3  # the, NOUN, was, un ##watch ##able -- checked: unwatchable is 3 pieces
    assert g.num_nodes() == p + 3
    assert g.ndata["tok"][p:].tolist() == [wordpiece.mask_id] * 3
    src, dst = g.edges()
    hears = lambda v: set(src[dst == v].tolist())  # noqa: E731
    cls, sep = 0, p - 1
    adj_pieces = [k for k, w in enumerate(pieces.word) if w == 3]  # the pieces of "unwatchable"
    vp = next(v for v in range(p, p + 3) if set(adj_pieces) <= hears(v))  # the phrase "was unwatchable"
    assert hears(vp) == {cls, sep, vp, 3, *adj_pieces, p + 2}  # was, unwatchable's pieces, its parent S (last)
    for k in adj_pieces:
        assert hears(k) == {cls, sep, vp, *adj_pieces}  # its own word's pieces and its phrase
    assert "label" not in g.ndata  # pieces carry no treebank node labels


def test_dep_builds_on_pieces(toy_splits):
    cfg, splits = toy_splits
    construction, data = piece_dataset(cfg, splits, "dep")
    i = first_with(splits, "unwatchable")
    g, heads = data.graphs[i], splits["test"]["heads"][i]
    pieces = construction.wordpiece.pieces(splits["test"]["tokens"][i])
    assert g.num_nodes() == len(pieces)  # no extra nodes
    src, dst = g.edges()
    pairs = set(zip(src.tolist(), dst.tolist()))
    words_of = lambda w: [k for k, x in enumerate(pieces.word) if x == w]  # noqa: E731
    for w, h in enumerate(heads):
        linked = h >= 0
        for a in words_of(w):
            for b in words_of(h) if linked else []:
                assert (a, b) in pairs and (b, a) in pairs  # a word's pieces and its head's, both ways
    the, was = words_of(0), words_of(2)
    if heads[0] != 2 and heads[2] != 0:  # not linked in the parse: not linked on pieces
        assert not any((a, b) in pairs for a in the for b in was)
    assert g.num_edges() < len(pieces) ** 2


def test_unknown_or_unliftable_graph_is_one_line(toy_sst, tmp_path):
    with pytest.raises(ValueError) as e:
        models.make_construction({"name": "star"}, Vocab.build([["x"]]), yaml_mapping("model", "minilm"))
    assert "unknown graph 'star'" in str(e.value) and "\n" not in str(e.value)
    res = train([*overrides(toy_sst, tmp_path, "graph=knn", "trainer.max_epochs=1"), f"hydra.run.dir={tmp_path}/r"])
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "graph=knn is not built on word pieces" in lines[0] and "complete" in lines[0], lines


def test_pretrained_graphs_table_shows_finished_running_and_missing_cells(tmp_path):
    """studies/pretrained_graphs: a finished run's test accuracy and noise, a running one's last epoch, and
    'not run yet' for every other planned cell of the experiment's grids."""
    from studies import pretrained_graphs as pg

    runs = tmp_path / "runs"
    for name, finished in (
        ("dataset=sst_binary,graph=complete,seed=0", True),
        ("dataset=sst_binary,graph=dep,seed=0", False),
    ):
        d = runs / name
        (d / ".hydra").mkdir(parents=True)
        graph = "complete" if finished else "dep"
        (d / ".hydra" / "overrides.yaml").write_text(
            f"- experiment=pretrained_graphs\n- dataset=sst_binary\n- dataset.data_dir=x\n- graph={graph}\n- seed=0\n"
        )
        (d / "metrics.csv").write_text(
            "epoch,step,lr,train_loss,train_acc,val_loss,val_acc,examples_per_second,seconds\n1,217,0,0.4,0.8,0.35,0.8578,13,560\n"
        )
        if finished:
            results = {
                "best_val_acc": 0.87,
                "best_epoch": 2,
                "test_acc": 0.8775,
                "epochs": 2,
                "train_seconds": 1200.0,
                "num_examples": {"train": 6920, "val": 872, "test": 1821},
            }
            (d / "results.json").write_text(json.dumps(results))
    out = tmp_path / "out"
    assert pg.main(["--runs", str(runs), "--out", str(out), "--figures", str(out)]) == 0
    md = (out / "pretrained_graphs.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| binary SST |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1].startswith("87.75 (1 seed, val 87.00)") and cells[1].endswith("[3 planned]")
    assert cells[2].startswith("unfinished (epoch 1: val 85.78)")
    assert "not run yet" in cells[3]
    assert "±1.54" in md  # 2 sqrt(.8775 * .1225 / 1821) = 1.54 points
    assert "binary SST ≥ 90: 87.75" in md and "missed by 2.25 points" in md
    assert "SST-5 ≥ 50: not run yet" in md
    assert (out / "pretrained_graphs.png").is_file()


def fake_run(tmp_dir, name, overrides, test_acc=None, val_acc=0.8, n_test=1821):
    """A run directory as train.py leaves it: its overrides, and results.json when ``test_acc`` is given."""
    d = tmp_dir / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    if test_acc is not None:
        (d / "checkpoints").mkdir()
        (d / "checkpoints" / "best.pt").write_bytes(b"")
        results = {
            "best_val_acc": val_acc,
            "best_epoch": 1,
            "test_acc": test_acc,
            "epochs": 1,
            "train_seconds": 100.0,
            "num_examples": {"train": 6920, "val": 872, "test": n_test},
        }
        (d / "results.json").write_text(json.dumps(results))
    return d


def test_pretrained_graphs_compares_with_complete_and_chooses_the_phrase_run_on_validation(tmp_path, monkeypatch):
    """The graph-vs-complete verdict is tools.stats.compare on the two cells (unpaired: no run kept per-example
    predictions) and the table names its rule; ``--table-only`` draws the same table from the JSON alone; an
    sst2 run is scored on binary SST's val and test (once) and wins the binary SST target only by its
    validation score."""
    from studies import pretrained_graphs as pg

    runs = tmp_path / "runs"
    for graph, tests in (("complete", (0.87, 0.88, 0.86)), ("dep", (0.83, 0.84, 0.85))):
        for seed, acc in enumerate(tests):
            over = ["dataset=sst_binary", f"graph={graph}", f"seed={seed}"]
            fake_run(runs, f"dataset=sst_binary,graph={graph},seed={seed}", over, acc, val_acc=0.88)
    # the best test accuracy of all, but the worst validation score: never the one chosen
    fake_run(
        runs, "dataset=sst_binary,graph=window,seed=0", ["dataset=sst_binary", "graph=window", "seed=0"], 0.96, 0.8
    )
    phrase = ["dataset=sst2", "graph=complete", "seed=0", "trainer.max_epochs=1"]
    sst2 = fake_run(runs, "dataset=sst2,graph=complete,seed=0,trainer.max_epochs=1", phrase, 0.91, 0.93, 872)
    fake_run(runs, "dataset=sst2,graph=dep,seed=0", ["dataset=sst2", "graph=dep", "seed=0"])  # unfinished

    calls = []

    def evaluate_stub(cmd, cwd, check):  # stands in for `python evaluate.py ...`: writes what it would
        calls.append(cmd)
        # the overrides as Hydra's own grammar reads them (run directories hold '=' and ',')
        parsed = OverridesParser.create().parse_overrides(cmd[2:])
        args = {o.key_or_group: o.value() for o in parsed}
        acc = {"val": 0.895, "test": 0.905}[args["split"]]
        out = Path(args["hydra.run.dir"])
        out.mkdir(parents=True)
        n = 872 if args["split"] == "val" else 1821
        right = round(acc * n)
        (out / "eval.json").write_text(json.dumps({"accuracy": acc, "confusion": [[right, 0], [n - right, 0]]}))

    monkeypatch.setattr(pg.subprocess, "run", evaluate_stub)
    out = tmp_path / "out"
    assert pg.main(["--runs", str(runs), "--out", str(out), "--figures", str(out), "--sst-dir", "SST"]) == 0
    assert len(calls) == 2  # val and test of the finished sst2 run; the unfinished one is not scored
    assert all("dataset=sst_binary" in c and "dataset.data_dir='SST'" in c for c in calls)
    assert calls[0][2] == f"checkpoint='{sst2 / 'checkpoints' / 'best.pt'}'"
    md = (out / "pretrained_graphs.md").read_text()
    # complete 87 ± 1, dep 84 ± 1 (3 seeds): seeds' variance 1²/3 each plus each cell's binomial p(1-p)/1821,
    # on Welch-Satterthwaite's 36.6 degrees of freedom: noise 2.88, beyond it
    from tools.stats import Cell, compare

    v = compare(Cell((0.83, 0.84, 0.85), n=1821), Cell((0.87, 0.88, 0.86), n=1821))
    assert (v.verdict, v.rule, f"{100 * v.noise:.2f}") == ("B higher", "unpaired", "2.88")
    assert "| binary SST | dep | 3 / 3 | -3.00 | 2.88 | complete higher | unpaired | 1.00× |" in md
    assert "[docs/statistics.md](../statistics.md)" in md
    saved = json.loads((out / "pretrained_graphs.json").read_text())
    judged = {(c["dataset"], c["graph"]): c for c in saved["comparisons"]}
    assert judged[("sst_binary", "dep")] == {
        "dataset": "sst_binary",
        "graph": "dep",
        "against": "complete",
        **v.as_dict(),
    }
    assert judged[("sst_binary", "window")]["rule"] == "unpaired"  # one seed: borrows complete's seed spread
    # --table-only: the same table and verdicts from the committed JSON alone
    again = tmp_path / "again"
    again.mkdir()
    (again / "pretrained_graphs.json").write_text((out / "pretrained_graphs.json").read_text())
    assert pg.main(["--table-only", "--out", str(again)]) == 0
    assert (again / "pretrained_graphs.md").read_text() == md
    assert json.loads((again / "pretrained_graphs.json").read_text()) == saved
    assert "| dataset=sst2,graph=complete,seed=0,trainer.max_epochs=1 | 93.00 | 91.00 | 89.50 | 90.50 |" in md
    assert "binary SST ≥ 90: 90.50 (dataset=sst2,graph=complete,seed=0,trainer.max_epochs=1, scored on binary SST" in md
    assert "1 seed; the best of 4 cells on validation, 89.50): met by 0.50 points (one seed: not judged)" in md
    # scored once: a second table run calls nothing
    calls.clear()
    assert pg.main(["--runs", str(runs), "--out", str(out), "--figures", str(out)]) == 0 and calls == []


def test_a_checkout_with_fewer_runs_keeps_the_committed_pretrained_graphs_table(tmp_path, monkeypatch):
    """Building the table from a run folder with fewer runs than the committed JSON would write it over with
    fewer (a fresh clone: every cell 'not run yet'): it stops with one line naming --table-only, before an sst2
    run is scored or anything is written."""
    from studies import pretrained_graphs as pg

    monkeypatch.setattr(pg.subprocess, "run", lambda *a, **k: pytest.fail("scored before the runs were checked"))
    out = tmp_path / "out"
    out.mkdir()
    committed = out / "pretrained_graphs.json"
    committed.write_text(json.dumps({"runs": [{"dir": "a"}, {"dir": "b"}], "cells": [], "base_lr": "3e-05"}))
    before = committed.read_bytes()
    runs = tmp_path / "runs"
    fake_run(runs, "dataset=sst2,graph=complete,seed=0", ["dataset=sst2", "graph=complete", "seed=0"], 0.91)
    for where in (tmp_path / "nowhere", runs):  # missing, and a folder of fewer runs
        with pytest.raises(SystemExit, match=r"holds [01] runs, .*pretrained_graphs.json 2: add --table-only"):
            pg.main(["--runs", str(where), "--out", str(out), "--figures", str(out)])
    assert committed.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["pretrained_graphs.json"]


@pytest.mark.parametrize(
    ("other_val", "verdict"),
    [(0.85, "the recipe's 3e-05 scores highest on validation (one seed, not judged)"), (0.90, "5e-05 scores higher")],
)
def test_pretrained_graphs_learning_rate_is_judged_on_validation(other_val, verdict):
    """The lr grid's verdict follows validation, not test (the other lr always has the better test score)."""
    from studies import pretrained_graphs as pg

    def run(lr, val, test):
        settings = {"dataset": "sst_binary", "graph": "complete", "seed": "0", **({"optim.lr": lr} if lr else {})}
        return {"settings": settings, "finished": True, "best_val_acc": val, "test_acc": test}

    plain = [{"settings": {"dataset": "sst_binary", "graph": "complete"}, "runs": [run(None, 0.88, 0.87)]}]
    others = [
        {
            "settings": {"dataset": "sst_binary", "graph": "complete", "optim.lr": "5e-05"},
            "runs": [run("5e-05", other_val, 0.95)],
        }
    ]
    text = "\n".join(pg.learning_rate_section(plain, others, "3e-05"))
    assert "3e-05: val 88.00 (test 87.00), 5e-05: val" in text and verdict in text
