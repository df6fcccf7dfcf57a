"""Short training runs: every model x graph learns, and writes the files train.py's docstring lists: results.json
(with the contract keys below), metrics.csv and checkpoints/{best,last}.pt."""

import csv
import json

import pytest
import torch

from engine.distributed import pick_device
from engine.evaluation import decode_correct
from engine.loop import warmup_cosine
from tests.conftest import assert_breakdowns_match_test_acc, compose_config, rescored_test_acc
from train import run

CONTRACT_KEYS = {
    "dataset",
    "graph",
    "model",
    "num_params",
    "best_val_acc",
    "test_acc",
    "epochs",
    "train_seconds",
    "examples_per_second",
    "device",
    "seed",
}


def epoch_rows(out_dir):
    with open(out_dir / "metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("graph", ["complete", "tree", "window", "knn", "none"])
@pytest.mark.parametrize("model", ["gcn", "gat", "transformer", "sum", "mean", "max"])
def test_every_model_and_graph_trains(model, graph, tmp_path, tiny_overrides):
    cfg = compose_config(tiny_overrides + [f"model={model}", f"graph={graph}", "trainer.max_epochs=3", "optim.lr=3e-3"])
    results = run(cfg, tmp_path)

    rows = epoch_rows(tmp_path)
    assert len(rows) == 3
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"]), rows  # it learns something
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert CONTRACT_KEYS <= on_disk.keys()
    assert on_disk == json.loads(json.dumps(results))
    assert (on_disk["model"], on_disk["graph"], on_disk["epochs"]) == (model, graph, 3)
    assert on_disk["num_params"] > 0
    assert on_disk["best_val_acc"] == max(float(r["val_acc"]) for r in rows)
    assert_breakdowns_match_test_acc(on_disk)
    correct = decode_correct(on_disk["test_predictions"])  # one bit per test example, in the split's order
    assert len(correct) == on_disk["num_examples"]["test"] and correct.mean() == on_disk["test_acc"]
    assert len(on_disk["test_predictions"]["fingerprint"]) == 16
    assert rescored_test_acc(tmp_path, tmp_path / "eval") == on_disk["test_acc"]  # best.pt, scored afresh
    for name in ("best.pt", "last.pt"):
        ckpt = torch.load(tmp_path / "checkpoints" / name, weights_only=True)
        assert {"model", "config", "vocab", "optimizer", "epoch"} <= ckpt.keys()
    assert not list(tmp_path.rglob("*.tmp")), "a temporary file was left behind"


def test_transformer_fits_a_small_training_set(tmp_path):
    """Memorising 128 ListOps examples is easy for a 4-layer Transformer: train accuracy near 1."""
    cfg = compose_config(["debug=overfit", "trainer.progress=false", "trainer.max_epochs=40"])
    run(cfg, tmp_path)
    rows = epoch_rows(tmp_path)
    assert float(rows[-1]["train_acc"]) > 0.9, rows[-1]
    assert float(rows[-1]["train_loss"]) < 0.5 * float(rows[0]["train_loss"])


def test_cls_and_root_readouts_train(tmp_path, tiny_overrides):
    """Each readout learns (its training loss falls), and its checkpoint scores the test accuracy it reported."""
    for readout in ("cls", "root"):
        out = tmp_path / readout
        results = run(compose_config(tiny_overrides + [f"model.readout={readout}", "graph=knn", "optim.lr=3e-3"]), out)
        rows = epoch_rows(out)
        assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"]), (readout, rows)
        assert rescored_test_acc(out, tmp_path / f"eval_{readout}") == results["test_acc"], readout


def test_shared_weights_have_one_block(tmp_path, tiny_overrides):
    shared = run(compose_config(tiny_overrides + ["model.share_weights=true", "model.num_layers=4"]), tmp_path / "a")
    separate = run(compose_config(tiny_overrides + ["model.num_layers=4"]), tmp_path / "b")
    assert shared["num_params"] < separate["num_params"]


def test_schedule_warms_up_then_decays():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = warmup_cosine(opt, total_steps=100, warmup_ratio=0.1, min_lr_ratio=0.1)
    lrs = []
    for _ in range(100):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a <= b for a, b in zip(lrs[:10], lrs[1:10]))  # rising
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))  # then falling
    assert lrs[-1] == pytest.approx(0.1, abs=0.01)


def test_device_choice():
    assert pick_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        assert pick_device("auto").type == "cpu"
    with pytest.raises(ValueError, match="valid: auto, cpu, cuda"):
        pick_device("tpu")


def test_optim_adagrad_is_tai_et_al_s_optimiser_at_a_constant_rate(tmp_path, tiny_overrides):
    """``optim=adagrad`` builds torch's Adagrad with the config's lr and L2 penalty, its schedule keeps the
    learning rate constant, the optimiser state in the checkpoint is Adagrad's (a sum of squared gradients),
    and a short run learns."""
    from engine.loop import make_optimizer, make_schedule

    cfg = compose_config(tiny_overrides + ["optim=adagrad", "trainer.max_epochs=3"])
    params = [torch.nn.Parameter(torch.ones(3))]
    opt = make_optimizer(params, cfg.optim)
    assert type(opt) is torch.optim.Adagrad
    assert (opt.defaults["lr"], opt.defaults["weight_decay"]) == (0.05, 1e-4)
    sched = make_schedule(opt, 50, cfg.optim)
    lrs = []
    for step in range(50):
        lrs.append(sched.get_last_lr()[0])
        params[0].grad = torch.ones(3)
        opt.step()
        sched.step()
        if step == 0:  # Adagrad's first step moves each weight by lr * g / |g|: by lr, whatever the gradient
            assert params[0].detach() == pytest.approx(torch.full((3,), 0.95), abs=1e-6)
    assert lrs == [0.05] * 50
    assert run(cfg, tmp_path)["epochs"] == 3
    rows = epoch_rows(tmp_path)
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"]), rows
    state = torch.load(tmp_path / "checkpoints" / "last.pt", weights_only=True)["optimizer"]["state"]
    assert all("sum" in s for s in state.values()), "not Adagrad's state"
    assert all(float(r["lr"]) == pytest.approx(0.05) for r in rows)
