"""evaluate.py rebuilds everything from a checkpoint and reproduces the run's test accuracy."""

import json
import subprocess
import sys

import pytest
import torch

from data import listops
from data.splits import load_splits
from evaluate import evaluate
from tests.conftest import ROOT, compose_config
from train import run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    cfg = compose_config(
        [
            "debug=tiny",
            "trainer.progress=false",
            "logger=none",
            "model=gat",
            "graph=tree",
            "trainer.max_epochs=3",
            "optim.lr=3e-3",
        ]
    )
    return out, run(cfg, out), cfg


def eval_cfg(**kw):
    return compose_config([f"{k}={v}" for k, v in kw.items()], config_name="evaluate")


def test_reproduces_test_accuracy(trained, tmp_path):
    out, results, _ = trained
    result = evaluate(eval_cfg(checkpoint=out / "checkpoints" / "best.pt"), tmp_path)
    assert result["accuracy"] == results["test_acc"]
    saved = json.loads((tmp_path / "eval.json").read_text())
    assert saved["accuracy"] == results["test_acc"]
    assert {"by_depth", "by_length", "by_root", "confusion"} <= saved.keys()
    assert sum(v["n"] for v in saved["by_depth"].values()) == results["num_examples"]["test"]
    assert sum(map(sum, saved["confusion"])) == results["num_examples"]["test"]
    assert (tmp_path / "confusion.png").stat().st_size > 1000


@pytest.mark.parametrize("layout", ["listops", "lra"])
def test_data_file_in_both_layouts(trained, tmp_path, layout):
    """The test split written as a TSV scores exactly like the split itself."""
    out, results, cfg = trained
    test_rows = load_splits(cfg.dataset)["test"]
    path = tmp_path / f"test_{layout}.tsv"
    listops.write_tsv(test_rows, path, layout=layout)
    result = evaluate(eval_cfg(checkpoint=out / "checkpoints" / "best.pt", data_file=path), tmp_path / "ev")
    assert result["accuracy"] == results["test_acc"]
    assert result["data"] == str(path)


def test_bad_checkpoints_give_one_line_errors(trained, tmp_path):
    out, _, _ = trained
    with pytest.raises(FileNotFoundError, match="pass checkpoint="):
        evaluate(eval_cfg(), tmp_path)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        evaluate(eval_cfg(checkpoint=tmp_path / "missing.pt"), tmp_path)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes((out / "checkpoints" / "best.pt").read_bytes()[:500])
    with pytest.raises(ValueError, match="truncated or foreign"):
        evaluate(eval_cfg(checkpoint=truncated), tmp_path)
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {}}, foreign)
    with pytest.raises(ValueError, match="not a tagnn-checkpoint"):
        evaluate(eval_cfg(checkpoint=foreign), tmp_path)
    other_vocab = tmp_path / "other_vocab.pt"
    ckpt = torch.load(out / "checkpoints" / "best.pt", weights_only=True)
    ckpt["vocab"] = ckpt["vocab"] + ["extra-token"]
    torch.save(ckpt, other_vocab)
    with pytest.raises(ValueError, match="do not match its vocabulary"):
        evaluate(eval_cfg(checkpoint=other_vocab), tmp_path)
    assert not (tmp_path / "eval.json").exists()


def test_command_line(trained, tmp_path):
    out, results, _ = trained
    ok = subprocess.run(
        [
            sys.executable,
            "evaluate.py",
            f"checkpoint={out / 'checkpoints' / 'best.pt'}",
            f"hydra.run.dir={tmp_path / 'cli'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert f"accuracy {results['test_acc']:.4f}" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "evaluate.py", f"checkpoint={tmp_path / 'nope.pt'}", f"hydra.run.dir={tmp_path / 'cli2'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("error: no checkpoint at") and len(bad.stderr.strip().splitlines()) == 1


def test_test_predictions_round_trip_and_refuse_damage():
    """encode_correct keeps one bit per example; decode gives the same booleans back (any length, not only
    multiples of 8), and a damaged or truncated record is refused in one line that names the fix."""
    from engine.evaluation import decode_correct, encode_correct

    gen = torch.Generator().manual_seed(0)
    for n in (1, 7, 8, 13, 1000):
        labels = torch.randint(0, 10, (n,), generator=gen)
        preds = torch.where(torch.rand(n, generator=gen) < 0.6, labels, (labels + 1) % 10)
        enc = encode_correct(preds, labels, "abc")
        assert enc["n"] == n and enc["fingerprint"] == "abc"
        assert decode_correct(enc).tolist() == (preds == labels).tolist()
    with pytest.raises(ValueError, match="rerun"):
        decode_correct({**enc, "n": 2000})  # more examples than bits
    with pytest.raises(ValueError, match="rerun"):
        decode_correct({**enc, "correct": "not base64!"})


def test_split_fingerprint_follows_content_and_order(tmp_path):
    """GraphDataset.fingerprint: the same split twice gives the same; another order or one label changed, not."""
    from data.graph_dataset import GraphDataset
    from data.graphs import GraphConstruction
    from data.vocab import Vocab

    splits = load_splits(compose_config(["debug=tiny"]).dataset, progress=False)
    test = splits["test"]
    vocab = Vocab.build(splits["train"]["tokens"])
    make = lambda ds: GraphDataset(ds, vocab, GraphConstruction(), progress=False, lazy=True).fingerprint  # noqa: E731
    assert make(test) == make(test)
    assert make(test) != make(test.select(list(reversed(range(len(test))))))
    flipped = test.map(lambda ex, i: {"label": (ex["label"] + 1) % 10 if i == 0 else ex["label"]}, with_indices=True)
    assert make(test) != make(flipped)
