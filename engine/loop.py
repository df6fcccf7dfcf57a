"""One training epoch: forward, loss, backward, clipping, a step of the optimiser and the schedule (linear
warmup, then cosine or linear decay to a floor, stepped once per batch); what the epoch reports (running loss and
accuracy, the finite-loss check, bar, heartbeat, W&B's per-step metrics) is ``engine.meters.Meters``'."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from data.device_batches import DenseBatch
from engine.meters import Meters

PRECISIONS = ("fp32", "bf16")  # trainer.precision


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


def autocast(device: torch.device, precision: str):
    """bf16 autocast for ``trainer.precision=bf16`` (CUDA, or the CPU's bf16 kernels), else nothing."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


@dataclass
class Learner:
    """What a step reads and changes: the model, its optimiser and schedule, ``devices`` (the model's, the graphs'),
    and the epoch's settings (``precision``, ``phrase_loss``, ``grad_clip``)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    devices: tuple[torch.device, torch.device]
    settings: EpochSettings


def train_epoch(learner: Learner, loader, meters: Meters, epoch: int, step: int) -> tuple[float, float, float, int]:
    """One pass over the training split (this process's share of it); returns mean loss, accuracy and
    examples/s over all processes (``meters``: :class:`engine.meters.Meters`, which reads the device only every
    ``log_every`` steps and at the end), and the last step."""
    model, optimizer, scheduler, s = learner.model, learner.optimizer, learner.scheduler, learner.settings
    device, graphs_on = learner.devices
    model.train()
    for g, y in meters.start(epoch, loader):
        if not isinstance(g, DenseBatch):  # a batch made on the device (trainer.device_batches) is there already
            g = g.to(graphs_on)
        y = y.to(device, non_blocking=True)
        with autocast(device, s.precision):
            if s.phrase_loss:  # + the mean loss over every labelled word and phrase (SST)
                logits, node_logits = model(g, nodes=True)  # (B, C), (N, C)
                node_y = g.ndata["label"]
                loss = F.cross_entropy(logits, y)
                if (node_y >= 0).any():  # on the graphs' device: the CPU, with PyPI's DGL
                    loss = loss + F.cross_entropy(node_logits, node_y.to(device), ignore_index=-1)
            else:
                logits = model(g)  # (B, C)
                loss = F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), s.grad_clip or float("inf"))
        optimizer.step()
        scheduler.step()
        step += 1
        meters.step(step, loss, logits, y, grad_norm, scheduler.get_last_lr()[0])
    return *meters.end(), step
