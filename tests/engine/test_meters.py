"""engine.meters.Meters, alone: the epoch's sums against a hand computation, the finite-loss check's one line at
the log point, and the log points (W&B, heartbeat) on their schedule."""

from __future__ import annotations

import logging

import pytest
import torch

from engine.loop import EpochSettings
from engine.meters import Meters

CPU = torch.device("cpu")


class Tracker:
    def __init__(self):
        self.logged = []

    def log(self, metrics, step):
        self.logged.append((step, metrics))


def feed(meters: Meters, batches, first_step: int = 0):
    """``batches``: (loss, logits rows, labels) per step, as the loop hands them over after the optimiser's step."""
    for i, (loss, logits, labels) in enumerate(batches, start=first_step + 1):
        meters.step(i, torch.tensor(loss), torch.tensor(logits), torch.tensor(labels), torch.tensor(0.5), 1e-3)


BATCHES = [  # a 2-class problem: losses and the rows' argmax against the labels
    (0.5, [[2.0, 1.0], [0.0, 1.0], [3.0, 0.0]], [0, 0, 0]),  # 2 of 3 right
    (1.25, [[0.0, 1.0]], [1]),  # 1 of 1
    (2.0, [[1.0, 0.0], [1.0, 0.0]], [1, 1]),  # 0 of 2
]


def test_the_epoch_means_are_the_hand_computed_ones():
    settings = EpochSettings(1, False, None, False, log_every=1000)
    meters = Meters(settings, Tracker(), CPU)
    assert list(meters.start(1, range(3))) == [0, 1, 2]  # the loader, in its bar
    feed(meters, BATCHES)
    loss, acc, rate = meters.end()
    assert loss == (0.5 * 3 + 1.25 * 1 + 2.0 * 2) / 6  # each batch's mean loss weighted by its size
    assert acc == 3 / 6
    assert rate > 0
    meters.start(2, range(1))  # a new epoch starts from zero
    feed(meters, BATCHES[1:2], first_step=3)
    assert meters.end()[:2] == (1.25, 1.0)


def test_a_non_finite_loss_is_named_at_the_log_point_in_one_line():
    settings = EpochSettings(1, False, None, False, log_every=4)
    meters = Meters(settings, Tracker(), CPU)
    meters.start(1, range(4))
    feed(meters, [BATCHES[0], (float("nan"), [[0.0, 1.0]], [1])], first_step=8)  # steps 9 and 10: not read yet
    with pytest.raises(ValueError) as e:
        feed(meters, [BATCHES[1], BATCHES[1]], first_step=10)  # step 12: the log point that reads the device
    assert str(e.value) == (  # the loop's step count before the bad step, as the message always named it
        "loss is nan at step 9; lower optim.lr or set optim.grad_clip (checkpoints/last.pt holds the last good epoch)"
    )


def test_a_non_finite_loss_after_the_last_log_point_is_named_at_the_end():
    meters = Meters(EpochSettings(1, False, None, False, log_every=1000), Tracker(), CPU)
    meters.start(1, range(2))
    feed(meters, [BATCHES[0], (float("inf"), [[0.0, 1.0]], [1])])
    with pytest.raises(ValueError, match=r"^loss is inf at step 1; lower optim.lr"):
        meters.end()


def test_log_points_and_heartbeat_lines_on_their_schedule(caplog):
    tracker = Tracker()
    settings = EpochSettings(3, False, None, False, log_every=2, heartbeat_s=1e-9)  # due at every log point
    meters = Meters(settings, tracker, CPU)
    meters.start(2, range(5))
    with caplog.at_level(logging.INFO, logger="train"):
        feed(meters, BATCHES + BATCHES[:2])  # steps 1 to 5
    assert [step for step, _ in tracker.logged] == [2, 4]
    assert tracker.logged[0][1] == {"train/loss": 1.25, "train/lr": 1e-3, "train/grad_norm": 0.5}
    lines = [r.getMessage() for r in caplog.records if r.name == "train"]
    assert [line.split(", ")[:3] for line in lines] == [
        ["epoch 2/3: 2/5 batches (40%)", "loss 0.688", "acc 0.750"],  # (0.5 * 3 + 1.25) / 4; 3 of 4 right
        ["epoch 2/3: 4/5 batches (80%)", "loss 0.917", "acc 0.556"],  # (2.75 + 2.0 * 2 + 0.5 * 3) / 9; 5 of 9
    ]
    assert all(line.endswith(" left in this epoch") for line in lines)  # after examples/s, from the clock
    caplog.clear()
    quiet = Meters(EpochSettings(3, True, None, False, log_every=2, heartbeat_s=1e-9), Tracker(), CPU)  # a bar
    for bar in (quiet, Meters(EpochSettings(3, False, None, False, log_every=2, heartbeat_s=0), Tracker(), CPU)):
        bar.start(1, range(5))
        with caplog.at_level(logging.INFO, logger="train"):
            feed(bar, BATCHES + BATCHES[:2])
    assert [r for r in caplog.records if r.name == "train"] == []  # no heartbeat under a bar, none with 0
