"""One training epoch: forward, loss, a finite-loss check, backward, clipping, a step of the optimiser and
the schedule (linear warmup, then cosine or linear decay to a floor, stepped once per batch), and W&B's per-step
metrics every ``trainer.log_every`` steps."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from engine.distributed import SINGLE, World, all_sum
from engine.tracking import Tracker


@dataclass(frozen=True)
class EpochSettings:
    """What one epoch reads from the config (``trainer.*`` and ``optim.grad_clip``), and nothing else."""

    max_epochs: int
    progress: bool  # a tqdm bar
    grad_clip: float | None  # 0 or None: no clipping (the norm is logged either way)
    phrase_loss: bool  # + the mean loss over every labelled word and phrase (SST)
    log_every: int  # steps between W&B train/* logs

    @classmethod
    def from_config(cls, cfg) -> EpochSettings:
        t = cfg.trainer
        return cls(int(t.max_epochs), bool(t.progress), cfg.optim.grad_clip, bool(t.phrase_loss), int(t.log_every))


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


def adamw(params, optim) -> torch.optim.Optimizer:
    """AdamW (decoupled weight decay): ``optim.lr``, ``optim.betas``, ``optim.weight_decay``."""
    return torch.optim.AdamW(
        params, lr=float(optim.lr), betas=tuple(optim.betas), weight_decay=float(optim.weight_decay)
    )


def adagrad(params, optim) -> torch.optim.Optimizer:
    """Adagrad, Tai et al. (2015)'s optimiser: ``optim.lr``, and ``optim.weight_decay`` as an L2 penalty added to
    every gradient (their 1e-4), not decoupled as AdamW's."""
    return torch.optim.Adagrad(params, lr=float(optim.lr), weight_decay=float(optim.weight_decay))


OPTIMISERS = {"adamw": adamw, "adagrad": adagrad}  # optim.name


def make_optimizer(params, optim) -> torch.optim.Optimizer:
    """The optimiser ``optim.name`` names, over ``params``."""
    if optim.name not in OPTIMISERS:
        raise ValueError(f"unknown optim.name {optim.name!r}; valid: {', '.join(OPTIMISERS)}")
    return OPTIMISERS[optim.name](params, optim)


def make_schedule(optimizer: torch.optim.Optimizer, total_steps: int, optim) -> torch.optim.lr_scheduler.LambdaLR:
    """``optim.schedule`` (cosine | linear) with ``optim.warmup_ratio`` and ``optim.min_lr_ratio``."""
    name = optim.get("schedule", "cosine")
    if name not in SCHEDULES:
        raise ValueError(f"unknown optim.schedule {name!r}; valid: {', '.join(SCHEDULES)}")
    return SCHEDULES[name](optimizer, total_steps, float(optim.warmup_ratio), float(optim.min_lr_ratio))


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
    the rest (:class:`EpochSettings`)."""
    model.train()
    loss_sum, correct, seen, start = 0.0, 0, 0, time.perf_counter()
    bar = tqdm(
        loader,
        desc=f"epoch {epoch}/{settings.max_epochs}",
        leave=False,
        disable=not settings.progress or not world.main,
    )
    device, graphs_on = devices
    grad_clip = settings.grad_clip
    for g, y in bar:
        g, y = g.to(graphs_on), y.to(device)
        if settings.phrase_loss:  # + the mean loss over every labelled word and phrase (SST)
            logits, node_logits = model(g, nodes=True)  # (B, C), (N, C)
            node_y = g.ndata["label"].to(device)
            loss = F.cross_entropy(logits, y)
            if (node_y >= 0).any():
                loss = loss + F.cross_entropy(node_logits, node_y, ignore_index=-1)
        else:
            logits = model(g)  # (B, C)
            loss = F.cross_entropy(logits, y)
        if not torch.isfinite(loss):
            raise ValueError(
                f"loss is {loss.item()} at step {step}; lower optim.lr or set optim.grad_clip "
                "(checkpoints/last.pt holds the last good epoch)"
            )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip else float("inf"))
        optimizer.step()
        scheduler.step()
        step += 1
        loss_sum += loss.item() * len(y)
        correct += (logits.argmax(-1) == y).sum().item()
        seen += len(y)
        bar.set_postfix(loss=f"{loss_sum / seen:.3f}", acc=f"{correct / seen:.3f}")
        if step % settings.log_every == 0:
            tracker.log(
                {
                    "train/loss": loss.item(),
                    "train/lr": scheduler.get_last_lr()[0],
                    "train/grad_norm": grad_norm.item(),
                },
                step=step,
            )
    loss_sum, correct, seen = all_sum(world, loss_sum, correct, seen, device=device if device.type == "cuda" else None)
    return loss_sum / seen, correct / seen, seen / (time.perf_counter() - start), step
