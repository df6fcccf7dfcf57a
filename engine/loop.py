"""One training epoch: forward, loss, a finite-loss check, backward, clipping, a step of the optimiser and
the schedule, and W&B's per-step metrics every ``trainer.log_every`` steps."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from tqdm.auto import tqdm

from engine.distributed import SINGLE, World, all_sum
from engine.tracking import Tracker


def train_epoch(
    model: torch.nn.Module,
    loader,
    optimizer: torch.optim.Optimizer,
    scheduler,
    devices: tuple[torch.device, torch.device],
    tracker: Tracker,
    step: int,
    cfg: DictConfig,
    epoch: int,
    world: World = SINGLE,
) -> tuple[float, float, float, int]:
    """One pass over the training split (this process's share of it); returns mean loss, accuracy and
    examples/s over all processes, and the last step. ``devices`` is (model's, graphs'); ``optim.grad_clip``
    (0 or null: none) bounds the gradient norm, which is logged either way."""
    model.train()
    loss_sum, correct, seen, start = 0.0, 0, 0, time.perf_counter()
    bar = tqdm(
        loader,
        desc=f"epoch {epoch}/{cfg.trainer.max_epochs}",
        leave=False,
        disable=not cfg.trainer.progress or not world.main,
    )
    device, graphs_on = devices
    grad_clip = cfg.optim.grad_clip
    for g, y in bar:
        g, y = g.to(graphs_on), y.to(device)
        if cfg.trainer.get("phrase_loss"):  # + the mean loss over every labelled word and phrase (SST)
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
        if step % cfg.trainer.log_every == 0:
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
