"""``trainer.device_batches``: training batches made on the model's device (data/device_batches.py) train the
same run as DGL's batches (the same sampler order, the same random draws: the same losses), alone and with
``trainer.compile``; where it cannot apply it is refused in one line that names the fix."""

from __future__ import annotations

import csv
import json

import pytest

from engine import compiled
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
