"""Train a GNN on sentence graphs and evaluate it: ``python train.py model=gat graph=complete``.

Steps, each a few lines below:
  1. data     generate / read the splits, build the vocabulary and one graph per sentence (once)
  2. model    the encoder named by ``model=`` (gcn | gat | transformer) with its aggregator
  3. train    AdamW, linear warmup + cosine decay, gradient clipping; validate every epoch and
              keep the best checkpoint by validation accuracy
  4. test     reload the best checkpoint, score the test split, write ``results.json``

Everything goes to the Hydra run directory (``hydra.run.dir=...`` sets it):
``results.json``, ``metrics.csv``, ``checkpoints/{best,last}.pt``, ``train.log`` and W&B's ``wandb/``.
``python train.py -m model=gcn,gat,transformer graph=complete,tree`` runs a grid (multirun).
"""

from __future__ import annotations

import csv
import logging
import math
import os
import random
import sys
import time
from pathlib import Path

import hydra
import numpy as np
import torch
import torch.nn.functional as F
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from data.graphs import GRAPHS, PE_GRAPHS
from data.pipeline import (
    DATASETS,
    SPLITS,
    GraphDataset,
    load_splits,
    make_construction,
    make_loader,
    num_classes_of,
    with_defaults,
)
from data.text import TEXT_DATASETS, TREEBANKS
from data.vocab import Vocab
from engine.checkpoint import load_checkpoint, restore_rng, rng_state, save_checkpoint
from engine.distributed import SINGLE, World, all_sum, finish
from engine.distributed import start as start_world
from engine.evaluation import predict, summarize
from engine.io import write_json
from engine.memory import memory_plan
from engine.tracking import MODES, Tracker
from models import MODELS, RECURSIVE_MODELS, build_model
from models.encoder import IMPLS, NORMS, POSITIONAL, READOUTS, UPDATES
from models.recursive import check_recursive

log = logging.getLogger("train")
DEVICES = ("auto", "cpu", "cuda")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def pick_device(name: str) -> torch.device:
    """``auto`` takes CUDA when torch sees a GPU, else the CPU."""
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}; valid: {', '.join(DEVICES)}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=cuda but torch sees no GPU; use device=auto or device=cpu")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


def graph_device(device: torch.device, impl: str) -> torch.device:
    """Where batched DGL graphs live: on ``device`` if this DGL build can put them there, else on the
    CPU, and then only the dense impl can train (PyPI's DGL wheel has no CUDA)."""
    if device.type == "cpu":
        return device
    import dgl

    try:
        dgl.graph(([0], [0])).to(device)
        return device
    except Exception:
        if impl == "sparse":
            raise ValueError(
                "model.impl=sparse needs DGL with CUDA on a GPU, and this DGL build is CPU-only: install DGL's "
                "CUDA wheel (README, Troubleshooting) or use model.impl=dense or model.impl=auto"
            ) from None
        log.warning("this DGL build is CPU-only: graphs stay on the CPU, the model runs dense on %s", device)
        return torch.device("cpu")


def warmup_cosine(optimizer, total_steps: int, warmup_ratio: float, min_lr_ratio: float):
    """lr multiplier: linear 0 -> 1 over the warmup steps, then cosine 1 -> ``min_lr_ratio``."""
    warmup = max(1, int(warmup_ratio * total_steps))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def train_epoch(
    model, loader, optimizer, scheduler, devices, grad_clip, tracker, step: int, cfg, epoch: int, world: World = SINGLE
):
    """One pass over the training split (this process's share of it); returns mean loss, accuracy and
    examples/s over all processes, and the last step."""
    model.train()
    loss_sum, correct, seen, start = 0.0, 0, 0, time.perf_counter()
    bar = tqdm(
        loader,
        desc=f"epoch {epoch}/{cfg.trainer.max_epochs}",
        leave=False,
        disable=not cfg.trainer.progress or not world.main,
    )
    device, graphs_on = devices
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


def find_resume(cfg: DictConfig, out_dir: Path) -> dict | None:
    """The checkpoint ``trainer.resume`` names: ``auto`` = this run directory's last.pt if there is one."""
    resume = cfg.trainer.get("resume")
    if not resume:
        return None
    path = out_dir / "checkpoints" / "last.pt" if resume == "auto" else Path(resume)
    if resume == "auto" and not path.is_file():
        log.info("trainer.resume=auto: no %s yet, starting from scratch", path)
        return None
    ckpt = load_checkpoint(path)
    now = OmegaConf.to_container(cfg, resolve=True)
    for key in ("dataset", "graph", "model", "optim"):
        theirs, ours = ckpt["config"].get(key), now.get(key)
        if key == "dataset":  # keys added since the checkpoint was written, as the data pipeline reads them
            theirs, ours = with_defaults(theirs), with_defaults(ours)
        if theirs != ours:
            raise ValueError(
                f"cannot resume from {path}: its {key} config differs from this run's; "
                f"resume with the same {key} overrides, or start a new run directory"
            )
    if "rng" not in ckpt:
        raise ValueError(f"cannot resume from {path}: it holds no training state (written by evaluate?)")
    log.info("resuming from %s after epoch %d", path, ckpt["epoch"])
    return ckpt


def check_config(cfg: DictConfig) -> None:
    """Fail before any work on a value no code path accepts; each message lists the valid ones."""
    choices = [
        ("dataset.name", cfg.dataset.name, DATASETS),
        ("graph.name", cfg.graph.name, GRAPHS),
        ("model.name", cfg.model.name, MODELS),
        ("model.readout", cfg.model.readout, READOUTS),
        ("model.positional", cfg.model.positional, POSITIONAL),
        ("model.pe_graph", cfg.model.get("pe_graph", "tree"), PE_GRAPHS),
        ("model.norm", cfg.model.norm, NORMS),
        ("model.update", cfg.model.get("update", "residual"), UPDATES),
        ("model.impl", cfg.model.impl, IMPLS),
        ("device", cfg.device, DEVICES),
        ("logger.mode", cfg.logger.mode, MODES),
        ("optim.name", cfg.optim.name, ("adamw",)),  # the one optimiser train.py builds
    ]
    for key, value, valid in choices:
        if value not in valid:
            raise ValueError(f"unknown {key} {value!r}; valid: {', '.join(valid)}")
    for key in (
        "trainer.max_epochs",
        "trainer.batch_size",
        "trainer.eval_batch_size",
        "model.hidden_dim",
        "model.num_layers",
        "model.num_heads",
    ):
        value = OmegaConf.select(cfg, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
    if cfg.model.name in RECURSIVE_MODELS:
        cell = cfg.model.get("cell") or RECURSIVE_MODELS[cfg.model.name]
        check_recursive(cfg.model.name, cell, cfg.graph.name, cfg.model.readout)
    if cfg.graph.name == "dep" and cfg.dataset.name not in TEXT_DATASETS:
        raise ValueError(
            f"graph=dep is the dependency parse of text, and dataset={cfg.dataset.name} is not text: "
            "use graph=tree (the expression's own tree)"
        )
    if cfg.trainer.get("phrase_loss") and cfg.dataset.name not in TREEBANKS:
        raise ValueError(
            f"trainer.phrase_loss=true trains on a label for every phrase, and dataset={cfg.dataset.name} has none: "
            f"use dataset={' or dataset='.join(TREEBANKS)}, or trainer.phrase_loss=false"
        )
    if cfg.model.name in ("gat", "transformer") and cfg.model.hidden_dim % cfg.model.num_heads:
        raise ValueError(
            f"model.hidden_dim={cfg.model.hidden_dim} must be divisible by model.num_heads={cfg.model.num_heads}"
        )


def run(cfg: DictConfig, out_dir: str | os.PathLike) -> dict:
    """Train, validate, test; write everything under ``out_dir``; return the results dict."""
    check_config(cfg)
    out_dir = Path(out_dir)
    (out_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    config = OmegaConf.to_container(cfg, resolve=True)
    seed_everything(int(cfg.seed))
    device = pick_device(cfg.device)
    world = start_world(device.type == "cuda")  # torchrun: several processes, else a world of one
    if device.type == "cuda" and world.size > 1:
        device = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(device)
    if not world.main:  # one log, from rank 0
        logging.getLogger().setLevel(logging.WARNING)
    devices = (device, graph_device(device, cfg.model.impl))  # (model, graphs)

    # 1. data: splits -> vocabulary -> graphs, built once
    t0 = time.perf_counter()
    splits = load_splits(cfg.dataset, progress=cfg.trainer.progress)
    vocab = Vocab.build(splits["train"]["tokens"], min_freq=int(cfg.dataset.get("min_freq", 1)))
    num_classes = num_classes_of(cfg.dataset, splits)
    construction = make_construction(cfg.graph, vocab, cfg.model)
    if construction.name in ("tree", "binary_tree") and "parent" not in splits["train"].column_names:
        if cfg.dataset.name in TEXT_DATASETS:
            log.info(
                "graph=%s on %s: no gold trees, so the dependency parse (as graph=dep)",
                construction.name,
                cfg.dataset.name,
            )
    cache = cfg.dataset.get("cache_dir")  # text datasets: parsed splits and their graphs on disk
    # will it fit? (refused here, before the work, rather than killed mid-epoch); huge splits: graphs per batch
    lazy = memory_plan(cfg, construction, {s: splits[s]["length"] for s in SPLITS}, devices)
    sets = {s: GraphDataset(splits[s], vocab, construction, s, cfg.trainer.progress, cache, lazy[s]) for s in SPLITS}
    train_loader = make_loader(
        sets["train"],
        int(cfg.trainer.batch_size),
        shuffle=True,
        seed=int(cfg.seed),
        bucket=cfg.trainer.bucket_by_length,
        rank=world.rank,
        world=world.size,
    )
    eval_loaders = {s: make_loader(sets[s], int(cfg.trainer.eval_batch_size), shuffle=False) for s in ("val", "test")}
    log.info(
        "data: %s in %.1fs, vocab %d, %s",
        {s: len(d) for s, d in sets.items()},
        time.perf_counter() - t0,
        len(vocab),
        construction,
    )

    # 2. model and optimiser
    core = build_model(cfg.model, len(vocab), num_classes, construction).to(device)  # the model itself
    ddp_devices = [device] if device.type == "cuda" else None
    model = core if world.size == 1 else DistributedDataParallel(core, device_ids=ddp_devices)
    num_params = sum(p.numel() for p in core.parameters())
    log.info("model: %s, %d parameters, device %s", cfg.model.name, num_params, device)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=float(cfg.optim.lr),
        betas=tuple(cfg.optim.betas),
        weight_decay=float(cfg.optim.weight_decay),
    )
    max_epochs = int(cfg.trainer.max_epochs)
    scheduler = warmup_cosine(
        optimizer, max_epochs * len(train_loader), float(cfg.optim.warmup_ratio), float(cfg.optim.min_lr_ratio)
    )

    # 3. train (or go on from a checkpoint: model, optimiser, schedule, random states, counters)
    resumed = find_resume(cfg, out_dir)
    best_val, best_epoch, step, train_seconds, seen_examples, first_epoch = -1.0, 0, 0, 0.0, 0, 1
    if resumed:
        core.load_state_dict(resumed["model"])
        optimizer.load_state_dict(resumed["optimizer"])
        scheduler.load_state_dict(resumed["scheduler"])
        restore_rng(resumed["rng"], train_loader.rng)
        best_val, best_epoch, step = resumed["best_val_acc"], resumed["best_epoch"], resumed["step"]
        train_seconds, seen_examples = resumed["train_seconds"], resumed["seen_examples"]
        first_epoch = resumed["epoch"] + 1
    logger_cfg = config["logger"] if world.main else {**config["logger"], "mode": "disabled"}  # rank 0 logs
    tracker = Tracker(logger_cfg, config, out_dir, run_id=resumed.get("wandb_id") if resumed else None)
    tracker.summary({"model/num_params": num_params})
    metrics_path = out_dir / "metrics.csv"
    fields = ["epoch", "step", "lr", "train_loss", "train_acc", "val_loss", "val_acc", "examples_per_second", "seconds"]
    kept = []  # a resumed run keeps the rows of the epochs its checkpoint holds, and no later ones
    if resumed and metrics_path.is_file():
        with open(metrics_path, newline="") as f:
            kept = [r for r in csv.DictReader(f) if int(r["epoch"]) < first_epoch]
    common = {"config": config, "vocab": vocab.to_list(), "num_classes": num_classes}
    try:
        with open(metrics_path if world.main else os.devnull, "w", newline="") as f:  # rank 0 writes files
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(kept)
            for epoch in range(first_epoch, max_epochs + 1):
                t_epoch = time.perf_counter()
                train_loss, train_acc, eps, step = train_epoch(
                    model,
                    train_loader,
                    optimizer,
                    scheduler,
                    devices,
                    cfg.optim.grad_clip,
                    tracker,
                    step,
                    cfg,
                    epoch,
                    world,
                )
                train_seconds += time.perf_counter() - t_epoch
                seen_examples += len(sets["train"])
                preds, labels, val_loss = predict(core, eval_loaders["val"], *devices)
                val_acc = (preds == labels).float().mean().item()
                row = {
                    "epoch": epoch,
                    "step": step,
                    "lr": scheduler.get_last_lr()[0],
                    "train_loss": train_loss,
                    "train_acc": train_acc,
                    "val_loss": val_loss,
                    "val_acc": val_acc,
                    "examples_per_second": eps,
                    "seconds": time.perf_counter() - t_epoch,
                }
                writer.writerow(row)
                f.flush()
                tracker.log(
                    {
                        "train/epoch_loss": train_loss,
                        "train/acc": train_acc,
                        "val/loss": val_loss,
                        "val/acc": val_acc,
                        "train/examples_per_second": eps,
                        "epoch": epoch,
                    },
                    step=step,
                )
                state = {
                    "model": core.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "epoch": epoch,
                    "step": step,
                    "rng": rng_state(train_loader.rng),
                    "train_seconds": train_seconds,
                    "seen_examples": seen_examples,
                    "wandb_id": tracker.run_id,
                    **common,
                }
                if val_acc > best_val:
                    best_val, best_epoch = val_acc, epoch
                    if world.main:
                        save_checkpoint(
                            out_dir / "checkpoints" / "best.pt", best_val_acc=best_val, best_epoch=epoch, **state
                        )
                if world.main:
                    save_checkpoint(
                        out_dir / "checkpoints" / "last.pt", best_val_acc=best_val, best_epoch=best_epoch, **state
                    )
                log.info(
                    "epoch %d: train loss %.4f acc %.4f | val loss %.4f acc %.4f | %.0f ex/s",
                    epoch,
                    train_loss,
                    train_acc,
                    val_loss,
                    val_acc,
                    eps,
                )

        if not world.main:  # the other processes are done: rank 0 tests and reports
            tracker.finish()
            finish(world)
            return {"best_val_acc": best_val, "rank": world.rank}

        # 4. test with the best checkpoint
        best = load_checkpoint(out_dir / "checkpoints" / "best.pt")
        core.load_state_dict(best["model"])
        preds, labels, test_loss = predict(core, eval_loaders["test"], *devices)
        test = summarize(preds, labels, sets["test"].meta, num_classes)
        results = {
            "dataset": cfg.dataset.name,
            "graph": cfg.graph.name,
            "model": cfg.model.name,
            "num_params": num_params,
            "best_val_acc": best_val,
            "best_epoch": best_epoch,
            "test_acc": test["accuracy"],
            "test_loss": test_loss,
            "epochs": max_epochs,
            "train_seconds": round(train_seconds, 3),
            "examples_per_second": round(seen_examples / train_seconds, 2),
            "device": str(device),
            "seed": int(cfg.seed),
            "num_examples": {s: len(d) for s, d in sets.items()},
            "test_by_depth": test.get("by_depth"),
            "test_by_length": test.get("by_length"),
            "test_by_root": test.get("by_root"),
            "wandb_mode": tracker.mode,
        }
        write_json(out_dir / "results.json", results)
        tracker.summary({"test/acc": test["accuracy"], "test/loss": test_loss, "val/best_acc": best_val})
        log.info(
            "test acc %.4f (best val %.4f at epoch %d) -> %s",
            test["accuracy"],
            best_val,
            best_epoch,
            out_dir / "results.json",
        )
    except BaseException:
        tracker.finish(exit_code=1)
        raise
    tracker.finish()
    finish(world)
    return results


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    try:
        results = run(cfg, HydraConfig.get().runtime.output_dir)
    except (ValueError, OSError) as e:  # the user's to fix: one line, no traceback (TAGNN_DEBUG=1 shows it)
        if os.environ.get("TAGNN_DEBUG"):
            raise
        print(f"error: {e.strerror if isinstance(e, OSError) and e.strerror else e}", file=sys.stderr)
        sys.exit(2)
    return results["best_val_acc"]  # what a Hydra sweeper (Optuna) maximises


if __name__ == "__main__":
    main()
