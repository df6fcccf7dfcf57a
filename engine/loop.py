"""One training epoch: forward, loss, a finite-loss check, backward, clipping, a step of the optimiser and
the schedule (linear warmup, then cosine or linear decay to a floor, stepped once per batch), and W&B's per-step
metrics every ``trainer.log_every`` steps."""

from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from data.device_batches import DenseBatch
from engine.distributed import SINGLE, World, all_sum
from engine.tracking import Tracker

PRECISIONS = ("fp32", "bf16")  # trainer.precision
log = logging.getLogger("train")


def show_progress(requested: bool) -> bool:
    """tqdm bars only when asked for (``trainer.progress``), on a terminal, and not under a Hydra multirun: a
    log file or a sweep gets one line per epoch and no carriage returns."""
    if not requested or not sys.stderr.isatty():
        return False
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode != RunMode.MULTIRUN
    except (ImportError, ValueError):  # not under Hydra: a script or a test
        return True


@dataclass(frozen=True)
class EpochSettings:
    """What one epoch reads from the config (``trainer.*`` and ``optim.grad_clip``), and nothing else."""

    max_epochs: int
    progress: bool  # a tqdm bar
    grad_clip: float | None  # 0 or None: no clipping (the norm is logged either way)
    phrase_loss: bool  # + the mean loss over every labelled word and phrase (SST)
    log_every: int  # steps between W&B train/* logs (and reads of the device: loss, accuracy, finite-loss check)
    precision: str = "fp32"  # fp32 | bf16 (autocast)
    heartbeat_s: float = (
        0.0  # without a bar: a log line within the epoch at the first log point this long after the last; 0 off
    )

    @classmethod
    def from_config(cls, cfg, progress: bool | None = None) -> EpochSettings:
        """``progress``: whether bars show (default ``trainer.progress``; train.py passes :func:`show_progress`)."""
        t = cfg.trainer
        precision = str(t.get("precision", "fp32"))
        if precision not in PRECISIONS:
            raise ValueError(f"unknown trainer.precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        bars = bool(t.progress) if progress is None else progress
        heartbeat = float(t.get("heartbeat_s", 0))
        return cls(
            int(t.max_epochs), bars, cfg.optim.grad_clip, bool(t.phrase_loss), int(t.log_every), precision, heartbeat
        )


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


def warmup_cosine(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float, min_lr_ratio: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """lr multiplier: linear 0 -> 1 over the warmup steps, then cosine 1 -> ``min_lr_ratio``."""
    warmup = max(1, int(warmup_ratio * total_steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def warmup_linear(optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float, min_lr_ratio: float):
    """lr multiplier: linear 0 -> 1 over the warmup steps, then linear 1 -> ``min_lr_ratio`` at the last step
    (BERT's fine-tuning schedule with ``min_lr_ratio`` 0)."""
    warmup = max(1, int(warmup_ratio * total_steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return 1 - (1 - min_lr_ratio) * progress

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


SCHEDULES = {"cosine": warmup_cosine, "linear": warmup_linear}  # optim.schedule


def adamw(params, optim, **multi) -> torch.optim.Optimizer:
    """AdamW (decoupled weight decay): ``optim.lr``, ``optim.betas``, ``optim.weight_decay``; ``multi``: torch's
    ``fused=True`` or ``foreach=True`` (:func:`multi_tensor`), else its own choice."""
    return torch.optim.AdamW(
        params, lr=float(optim.lr), betas=tuple(optim.betas), weight_decay=float(optim.weight_decay), **multi
    )


def adagrad(params, optim, **multi) -> torch.optim.Optimizer:
    """Adagrad, Tai et al. (2015)'s optimiser: ``optim.lr``, and ``optim.weight_decay`` as an L2 penalty added to
    every gradient (their 1e-4), not decoupled as AdamW's. No fused Adagrad in torch 2.2: foreach at most."""
    multi = {"foreach": True} if multi else {}
    return torch.optim.Adagrad(params, lr=float(optim.lr), weight_decay=float(optim.weight_decay), **multi)


OPTIMISERS = {"adamw": adamw, "adagrad": adagrad}  # optim.name


def multi_tensor(device: torch.device) -> dict:
    """How a step updates every parameter at once (``trainer.compile``): one fused kernel on a GPU
    (``fused=True``), torch's foreach ops elsewhere; either way a handful of ops, not a few per parameter."""
    return {"fused": True} if device.type == "cuda" else {"foreach": True}


def make_optimizer(params, optim, device: torch.device | None = None) -> torch.optim.Optimizer:
    """The optimiser ``optim.name`` names, over ``params``; with ``device`` (``trainer.compile``), its
    multi-tensor update there (:func:`multi_tensor`), else torch's default (a loop over parameters on the CPU)."""
    if optim.name not in OPTIMISERS:
        raise ValueError(f"unknown optim.name {optim.name!r}; valid: {', '.join(OPTIMISERS)}")
    multi = {} if device is None else multi_tensor(device)
    return OPTIMISERS[optim.name](params, optim, **multi)


def make_schedule(optimizer: torch.optim.Optimizer, total_steps: int, optim) -> torch.optim.lr_scheduler.LambdaLR:
    """``optim.schedule`` (cosine | linear) with ``optim.warmup_ratio`` and ``optim.min_lr_ratio``."""
    name = optim.get("schedule", "cosine")
    if name not in SCHEDULES:
        raise ValueError(f"unknown optim.schedule {name!r}; valid: {', '.join(SCHEDULES)}")
    return SCHEDULES[name](optimizer, total_steps, float(optim.warmup_ratio), float(optim.min_lr_ratio))


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


def autocast(device: torch.device, precision: str):
    """bf16 autocast for ``trainer.precision=bf16`` (CUDA, or the CPU's bf16 kernels), else nothing."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def train_epoch(
    model: torch.nn.Module,
    loader,
    optimizer: torch.optim.Optimizer,
    scheduler,
    devices: tuple[torch.device, torch.device],
    tracker: Tracker,
    step: int,
    settings: EpochSettings,
    epoch: int,
    world: World = SINGLE,
) -> tuple[float, float, float, int]:
    """One pass over the training split (this process's share of it); returns mean loss, accuracy and
    examples/s over all processes, and the last step. ``devices`` is (model's, graphs'); ``settings`` says
    the rest (:class:`EpochSettings`).

    The host does not wait for the device at each step: the loss and the count of correct predictions add up
    on the device, and are read every ``log_every`` steps (W&B's metrics, the bar, the finite-loss check,
    which names the first bad step) and at the end of the epoch. Without a bar (a log file, a multirun), one of
    those reads every ``heartbeat_s`` seconds also logs a line: batches done, running loss and accuracy,
    examples/s and the time the epoch has left (:func:`heartbeat`)."""
    model.train()
    device, graphs_on = devices
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)  # float64: as the Python floats it replaces
    correct = torch.zeros((), dtype=torch.int64, device=device)
    seen, start, pending = 0, time.perf_counter(), []
    beat = start if settings.heartbeat_s > 0 and not settings.progress and world.main else None
    batches, done = _length(loader), 0
    bar = tqdm(
        loader,
        desc=f"epoch {epoch}/{settings.max_epochs}",
        leave=False,
        disable=not settings.progress or not world.main,
    )
    grad_clip = settings.grad_clip
    for g, y in bar:
        if not isinstance(g, DenseBatch):  # a batch made on the device (trainer.device_batches) is there already
            g = g.to(graphs_on)
        y = y.to(device, non_blocking=True)
        with autocast(device, settings.precision):
            if settings.phrase_loss:  # + the mean loss over every labelled word and phrase (SST)
                logits, node_logits = model(g, nodes=True)  # (B, C), (N, C)
                node_y = g.ndata["label"]
                loss = F.cross_entropy(logits, y)
                if (node_y >= 0).any():  # on the graphs' device: the CPU, with PyPI's DGL
                    loss = loss + F.cross_entropy(node_logits, node_y.to(device), ignore_index=-1)
            else:
                logits = model(g)  # (B, C)
                loss = F.cross_entropy(logits, y)
        pending.append((step, loss.detach()))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip else float("inf"))
        optimizer.step()
        scheduler.step()
        step += 1
        loss_sum += loss.detach().double() * len(y)
        correct += (logits.argmax(-1) == y).sum()
        seen += len(y)
        done += 1
        if step % settings.log_every == 0:  # the only reads of the device inside the epoch
            check_finite(pending)
            mean_loss, acc = loss_sum.item() / seen, correct.item() / seen
            bar.set_postfix(loss=f"{mean_loss:.3f}", acc=f"{acc:.3f}")
            now = time.perf_counter()
            if beat is not None and now - beat >= settings.heartbeat_s:
                beat = now
                log.info(heartbeat(epoch, settings.max_epochs, done, batches, seen, now - start, mean_loss, acc))
            tracker.log(
                {
                    "train/loss": loss.item(),
                    "train/lr": scheduler.get_last_lr()[0],
                    "train/grad_norm": grad_norm.item(),
                },
                step=step,
            )
    check_finite(pending)
    totals = all_sum(world, loss_sum.item(), correct.item(), seen, device=device if device.type == "cuda" else None)
    loss_sum, correct, seen = totals
    return loss_sum / seen, correct / seen, seen / (time.perf_counter() - start), step
