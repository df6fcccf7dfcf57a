"""``trainer.device_batches``: training batches made on the model's device (data/device_batches.py) train the
same run as DGL's batches (the same sampler order, the same random draws: the same losses), alone and with
``trainer.compile``; validation and test on batches made there score what DGL's batches score, bit for bit; where
it cannot apply it is refused in one line that names the fix."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from data.batches import Batches, make_loader
from data.device_batches import DeviceBatches
from engine import compiled
from engine.evaluation import encode_correct, predict
from tests.conftest import compose_config
from train import run

SAME = ("epoch", "step", "lr", "train_loss", "train_acc", "val_loss", "val_acc")  # all but the timings


def rows(out_dir) -> list[dict]:
    with open(out_dir / "metrics.csv") as f:
        return [{k: float(r[k]) for k in SAME} for r in csv.DictReader(f)]


def both(tmp_path, overrides: list[str]) -> tuple[list[dict], list[dict]]:
    """metrics.csv of the run with ``trainer.device_batches`` off, then on; the second wrote results.json."""
    out = []
    for on in ("false", "true"):
        run(compose_config(overrides + [f"trainer.device_batches={on}"]), tmp_path / on)
        out.append(rows(tmp_path / on))
    on_disk = json.loads((tmp_path / "true" / "results.json").read_text())
    assert 0 <= on_disk["test_acc"] <= 1 and on_disk["model"] == "transformer"
    return out[0], out[1]


@pytest.mark.parametrize("graph", ["complete", "tree"])
def test_device_batches_train_the_same_run(graph, tmp_path, tiny_overrides):
    overrides = tiny_overrides + ["model=transformer", f"graph={graph}", "model.impl=dense", "trainer.max_epochs=1"]
    off, on = both(tmp_path, overrides)
    assert len(off) == len(on) == 1
    assert abs(on[0]["train_loss"] - off[0]["train_loss"]) < 1e-6, (off, on)
    for key in SAME:  # validation (DGL's batches) of the weights each trained: the same weights
        assert on[0][key] == pytest.approx(off[0][key], abs=1e-6), key


def test_device_batches_with_compile_traced(tmp_path, tiny_overrides, monkeypatch):
    """With trainer.compile, each batch padded to its bucket on the device is the batch the compiled step makes
    from DGL's (aot_eager: traced, no code generated)."""
    monkeypatch.setattr(compiled, "BACKEND", "aot_eager")
    overrides = tiny_overrides + ["model=transformer", "graph=tree", "model.impl=dense", "model.hidden_dim=16"]
    overrides += ["model.num_layers=1", "trainer.max_epochs=1", "trainer.compile=true"]
    off, on = both(tmp_path, overrides)
    assert abs(on[0]["train_loss"] - off[0]["train_loss"]) < 1e-6, (off, on)


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["model.impl=sparse"], "set model.impl=dense"),
        (["model.impl=auto"], "set model.impl=dense"),
        (["model.impl=dense", "graph=knn"], "use another graph"),
    ],
)
def test_device_batches_refused_where_they_cannot_apply(overrides, says, tmp_path, tiny_overrides):
    cfg = compose_config(tiny_overrides + ["model=transformer", "trainer.device_batches=true", *overrides])
    with pytest.raises(ValueError, match="trainer.device_batches") as e:
        run(cfg, tmp_path)
    message = str(e.value)
    assert "\n" not in message and says in message and "trainer.device_batches=false" in message


def data_and_model(overrides: list[str]):
    """train.py's stage 1 and 2 for ``overrides`` with ``trainer.device_batches=true``: the data (its val and
    test loaders made on the device) and the untrained model."""
    from engine.checkpoint import seed_everything
    from engine.config import check_config
    from engine.distributed import SINGLE
    from train import build_data, build_training

    run_cfg = check_config(compose_config(overrides + ["trainer.device_batches=true"]))
    seed_everything(run_cfg.seed)
    cpu = torch.device("cpu")
    data = build_data(run_cfg, (cpu, cpu), SINGLE)
    return run_cfg, data, build_training(run_cfg, data, cpu, SINGLE).core


@pytest.mark.parametrize(
    "extra",
    [
        ["graph=complete"],
        ["graph=tree", "model.readout=root", "model.edge_types=true"],
        ["graph=tree", "trainer.eval_batch_size=5"],
    ],
)
def test_evaluation_on_device_batches_is_the_dgl_evaluation(extra, tiny_overrides):
    """Validation and test on batches made on the device: the same predictions, in the same order, the same loss
    (bit for bit) and the same random draws as on DGL's batches of the same split."""
    overrides = tiny_overrides + ["model=transformer", "model.impl=dense", *extra]
    run_cfg, data, core = data_and_model(overrides)
    cpu = torch.device("cpu")
    for split in ("val", "test"):
        made = data.eval_loaders[split]
        assert isinstance(made, DeviceBatches), split
        dgl_batches = make_loader(data.sets[split], run_cfg.trainer.eval_batch_size, shuffle=False)
        out = {}
        for name, loader in (("dgl", dgl_batches), ("device", made)):
            torch.manual_seed(1)
            preds, labels, loss = predict(core, loader, cpu, cpu)
            out[name] = preds, labels, loss, torch.rand(1)  # the draw after: the next epoch's dropout
        (p1, l1, loss1, r1), (p2, l2, loss2, r2) = out["dgl"], out["device"]
        assert torch.equal(p1, p2) and torch.equal(l1, l2) and loss1 == loss2 and torch.equal(r1, r2), split
        assert torch.equal(l2, data.sets[split].labels)  # dataset order
        fingerprint = data.sets[split].fingerprint
        assert encode_correct(p1, l1, fingerprint) == encode_correct(p2, l2, fingerprint)


def test_with_device_batches_an_epoch_makes_no_dgl_batch(tmp_path, tiny_overrides, monkeypatch):
    """The run with trainer.device_batches collates no DGL batch (training, validation, test), and reports what
    the run on DGL's batches reports: the same test predictions, one bit each."""
    overrides = tiny_overrides + ["model=transformer", "graph=tree", "model.impl=dense", "trainer.max_epochs=2"]
    off = run(compose_config(overrides + ["trainer.device_batches=false"]), tmp_path / "off")

    def refused(self, indices):
        raise AssertionError("a DGL batch was collated")

    monkeypatch.setattr(Batches, "make", refused)
    on = run(compose_config(overrides + ["trainer.device_batches=true"]), tmp_path / "on")
    assert on["test_predictions"] == off["test_predictions"]
    assert on["test_acc"] == off["test_acc"] and on["test_loss"] == pytest.approx(off["test_loss"], abs=1e-6)
    for a, b in zip(rows(tmp_path / "on"), rows(tmp_path / "off"), strict=True):  # as the training test: 1e-6
        assert a == pytest.approx(b, abs=1e-6)
