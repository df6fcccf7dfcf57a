"""What an epoch of training reports, kept apart from the step (``engine.loop.train_epoch``): the running loss and
accuracy, the finite-loss check, the progress bar, the heartbeat lines of a log file and W&B's per-step metrics.

The host does not wait for the device at each step: the loss and the count of correct predictions add up on the
device, and are read every ``log_every`` steps (W&B's metrics, the bar, the finite-loss check, which names the
first bad step) and at the end of the epoch. Without a bar (a log file, a multirun), one of those reads every
``heartbeat_s`` seconds also logs a line: batches done, running loss and accuracy, examples/s and the time the
epoch has left (:func:`heartbeat`)."""

from __future__ import annotations

import logging
import time

import torch
from tqdm.auto import tqdm

from engine.distributed import SINGLE, World, all_sum

log = logging.getLogger("train")


def _length(loader) -> int | None:
    try:
        return len(loader)
    except TypeError:  # an iterable without a length: the line says no time left
        return None


def heartbeat(
    epoch: int, epochs: int, done: int, batches: int | None, seen: int, elapsed: float, loss: float, acc: float
) -> str:
    """One line of progress within an epoch, for a log file: ``epoch 1/2: 1,200/4,901 batches (24%), loss
    0.912, acc 0.618, 48 examples/s, about 41 min left in this epoch``."""
    rate = seen / elapsed if elapsed > 0 else float("nan")
    where = f"{done:,}/{batches:,} batches ({100 * done / batches:.0f}%)" if batches else f"{done:,} batches"
    line = f"epoch {epoch}/{epochs}: {where}, loss {loss:.3f}, acc {acc:.3f}, {rate:.0f} examples/s"
    if not batches:
        return line
    left = elapsed / done * (batches - done)
    return line + f", about {f'{left / 60:.0f} min' if left >= 60 else f'{left:.0f} s'} left in this epoch"


def check_finite(pending: list[tuple[int, torch.Tensor]]) -> None:
    """Raise, naming the first step whose loss was not finite, among ``(step, loss)`` pairs kept since the last
    check (one read of the device for them all), and forget them."""
    if not pending:
        return
    values = torch.stack([loss for _, loss in pending]).float().cpu()
    bad = (~torch.isfinite(values)).nonzero()
    steps = [s for s, _ in pending]
    pending.clear()
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"loss is {values[i].item()} at step {steps[i]}; lower optim.lr or set optim.grad_clip "
            "(checkpoints/last.pt holds the last good epoch)"
        )


class Meters:
    """One run's epoch meters: ``start`` an epoch (its bar wraps the loader), ``step`` after each optimiser step,
    ``end`` for the epoch's mean loss, accuracy and examples/s over all processes. ``settings``: an
    ``engine.loop.EpochSettings`` (``max_epochs``, ``progress``, ``log_every``, ``heartbeat_s``); ``tracker``:
    W&B's (anything with ``log(metrics, step=)``); ``device``: the model's, where the sums add up."""

    def __init__(self, settings, tracker, device: torch.device, world: World = SINGLE):
        self.settings, self.tracker, self.device, self.world = settings, tracker, device, world

    def start(self, epoch: int, loader):
        """Zero the sums and start the clock; returns ``loader`` inside the bar (a no-op bar without one)."""
        s, device = self.settings, self.device
        self.epoch = epoch
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)  # float64: as the Python floats it replaced
        self.correct = torch.zeros((), dtype=torch.int64, device=device)
        self.seen, self.done, self.pending = 0, 0, []
        self.started = time.perf_counter()
        self.beat = self.started if s.heartbeat_s > 0 and not s.progress and self.world.main else None
        self.batches = _length(loader)
        self.bar = tqdm(
            loader, desc=f"epoch {epoch}/{s.max_epochs}", leave=False, disable=not s.progress or not self.world.main
        )
        return self.bar

    def step(self, step: int, loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor, grad_norm, lr: float):
        """Add a batch (``step``: the steps taken, this one included) to the sums, on the device; every
        ``log_every`` steps, read them (the only reads inside the epoch): the finite-loss check, the bar, the
        heartbeat, W&B's ``train/loss``, ``train/lr``, ``train/grad_norm``."""
        loss = loss.detach()
        self.pending.append((step - 1, loss))  # the check names a step by the count before it, as it always has
        self.loss_sum += loss.double() * len(labels)
        self.correct += (logits.argmax(-1) == labels).sum()
        self.seen += len(labels)
        self.done += 1
        if step % self.settings.log_every:
            return
        check_finite(self.pending)
        mean_loss, acc = self.loss_sum.item() / self.seen, self.correct.item() / self.seen
        self.bar.set_postfix(loss=f"{mean_loss:.3f}", acc=f"{acc:.3f}")
        now = time.perf_counter()
        if self.beat is not None and now - self.beat >= self.settings.heartbeat_s:
            self.beat = now
            args = (self.done, self.batches, self.seen, now - self.started, mean_loss, acc)
            log.info(heartbeat(self.epoch, self.settings.max_epochs, *args))
        self.tracker.log({"train/loss": loss.item(), "train/lr": lr, "train/grad_norm": grad_norm.item()}, step=step)

    def end(self) -> tuple[float, float, float]:
        """The epoch's mean loss, accuracy and examples/s, summed over all processes (the last check first)."""
        check_finite(self.pending)
        device = self.device if self.device.type == "cuda" else None
        loss_sum, correct, seen = all_sum(
            self.world, self.loss_sum.item(), self.correct.item(), self.seen, device=device
        )
        return loss_sum / seen, correct / seen, seen / (time.perf_counter() - self.started)
