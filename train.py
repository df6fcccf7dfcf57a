"""Train a GNN on sentence graphs and evaluate it: ``python train.py model=gat graph=complete``.

:func:`run` is four stages, each a function below, in the order they run:
  1. data     generate / read the splits, build the vocabulary and one graph per sentence (once, or per
              batch where the memory plan says a split would not fit), and the loaders
  2. model    the encoder named by ``model=`` (gcn | gat | transformer | ...) with its aggregator; the
              optimiser ``optim=`` names (adamw | adagrad) with linear warmup + cosine decay;
              DistributedDataParallel under torchrun
  3. fit      train with gradient clipping, validate every epoch, keep the best checkpoint by validation
              accuracy and the last one, from which ``trainer.resume`` goes on after a crash
  4. test     reload the best checkpoint, score the test split, write ``results.json``
The generic pieces (one epoch, the schedule, devices, checkpoints, config checks) live in ``engine/``.

Everything goes to the Hydra run directory (``hydra.run.dir=...`` sets it):
``results.json``, ``metrics.csv``, ``checkpoints/{best,last}.pt``, ``train.log`` and W&B's ``wandb/``.
``python train.py -m model=gcn,gat,transformer graph=complete,tree`` runs a grid (multirun).
"""

from __future__ import annotations

import csv
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import hydra
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from torch.nn.parallel import DistributedDataParallel

import models
from data.batches import Batches, make_loader
from data.cache import cache_root
from data.datasets import SPLITS
from data.graph_dataset import GraphDataset
from data.graphs import GraphConstruction
from data.splits import column, num_classes_of, token_counts
from data.vocab import Vocab
from engine.checkpoint import (
    Progress,
    find_resume,
    load_checkpoint,
    resume,
    rng_state,
    save_checkpoint,
    seed_everything,
)
from engine.config import RunConfig, check_config, exit_on_user_error
from engine.distributed import World, finish, start_devices
from engine.evaluation import encode_correct, predict, summarize
from engine.io import write_csv, write_json
from engine.loop import Learner, make_optimizer, make_schedule, show_progress, train_epoch
from engine.memory import memory_plan
from engine.meters import Meters
from engine.tracking import Tracker
from models.embeddings import embedding_summary

log = logging.getLogger("train")
METRICS = ["epoch", "step", "lr", "train_loss", "train_acc", "val_loss", "val_acc", "examples_per_second", "seconds"]
EPOCH_LINE = "epoch %d: train loss %.4f acc %.4f | val loss %.4f acc %.4f | %.0f ex/s"
Devices = tuple[torch.device, torch.device]  # (the model's, the graphs'): the CPU for graphs a DGL build cannot move


@dataclass
class Data:
    """Stage 1: the vocabulary, the graph construction, the three splits as graphs, and their loaders."""

    vocab: Vocab
    num_classes: int
    construction: GraphConstruction
    sets: dict[str, GraphDataset]
    # this process's share of each epoch (DeviceBatches with trainer.device_batches); ``.rng`` orders the batches
    train_loader: Batches
    eval_loaders: dict[str, Batches]  # val and test, whole, in dataset order (DeviceBatches too, when held)


@dataclass
class Training:
    """Stage 2: ``core`` is the model itself (checkpointed, validated, tested); ``model`` is what trains:
    ``core``, or ``core`` in DistributedDataParallel when several processes train."""

    core: torch.nn.Module
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    num_params: int


def build_data(run: RunConfig, devices: Devices, world: World) -> Data:
    """Splits -> vocabulary -> graphs -> loaders. Too big for the machine is refused here, before the work,
    rather than killed mid-epoch; a split too big to hold as graphs gets its graphs built per batch."""
    t0 = time.perf_counter()
    dataset_cfg = run.dataset_cfg
    bars = show_progress(run.trainer.progress)  # on a terminal only, never in a multirun
    splits = run.dataset.load_splits(dataset_cfg, bars)
    vocab = Vocab.from_counts(token_counts(splits["train"]), min_freq=int(dataset_cfg.get("min_freq", 1)))
    num_classes = num_classes_of(dataset_cfg, splits, run.dataset)
    construction = models.make_construction(run.graph_cfg, vocab, run.model)
    no_trees = construction.kind.gold_tree and "parent" not in splits["train"].column_names
    if no_trees and run.dataset.text:
        message = "graph=%s on %s: no gold trees, so the dependency parse (as graph=dep)"
        log.info(message, construction.name, dataset_cfg.name)
    cache = cache_root(dataset_cfg)  # built graphs on disk (data/cache.py: dataset.cache_dir or $TAGNN_CACHE_DIR)
    lazy = memory_plan(run, construction, {s: column(splits[s], "length") for s in SPLITS}, devices)
    sets = {s: GraphDataset(splits[s], vocab, construction, s, bars, cache, lazy[s]) for s in SPLITS}
    batch, seed, bucket = run.trainer.batch_size, run.seed, run.trainer.bucket_by_length
    # on a GPU, a thread collates the next batches (labels pinned) while the model computes the current one
    gpu = devices[0].type == "cuda"
    ahead = {"prefetch": 2 if gpu else 0, "pin": gpu}
    train_loader = make_loader(
        sets["train"], batch, shuffle=True, seed=seed, bucket=bucket, rank=world.rank, world=world.size, **ahead
    )
    # evaluation: big batches (trainer.eval_batch_size), collated once and served every epoch (held splits only)
    eval_batch = run.trainer.eval_batch_size
    eval_loaders = {
        s: make_loader(sets[s], eval_batch, shuffle=False, keep=not lazy[s], **ahead) for s in ("val", "test")
    }
    if run.trainer.device_batches:  # the same samplers' batches, made on the model's device (data/device_batches.py)
        train_loader, eval_loaders = device_loaders(
            run, construction, sets, train_loader, eval_loaders, devices[0], world, lazy
        )
    sizes = {s: len(d) for s, d in sets.items()}
    log.info("data: %s in %.1fs, vocab %d, %s", sizes, time.perf_counter() - t0, len(vocab), construction)
    return Data(vocab, num_classes, construction, sets, train_loader, eval_loaders)


def device_loaders(run: RunConfig, construction, sets, train_loader, eval_loaders, device, world, lazy):
    """``trainer.device_batches``: each split kept on ``device`` (``DeviceSplit``), its batches made there in its
    loader's order (training: ``train_loader``'s sampler; val and test: dataset order, ``trainer.eval_batch_size``),
    so that no epoch makes a DGL batch; refused in one line where that cannot apply (``check_device_batches``). A
    val or test split the memory plan builds per batch keeps DGL's batches."""
    from data.device_batches import DeviceBatches
    from engine.compiled import check_device_batches
    from models.dense import bucket_length

    check_device_batches(getattr(run.model, "impl", "sparse"), device, construction, run, world.size, lazy["train"])
    pad = bucket_length if run.trainer.compile else None  # trainer.compile: the batch padded to its bucket
    train = DeviceBatches(device_split(run, construction, sets["train"], device), train_loader.batch_sampler, pad)
    evals = dict(eval_loaders)
    for s in evals:  # padded to their largest graph (evaluation is eager: no bucket)
        if lazy[s]:
            log.info("trainer.device_batches: the %s split is built per batch, evaluated on DGL's batches", s)
            continue
        try:
            evals[s] = DeviceBatches(device_split(run, construction, sets[s], device), eval_loaders[s].batch_sampler)
        except ValueError as e:  # graphs that differ in their data keys: evaluation keeps DGL's batches
            log.info("trainer.device_batches: the %s split is evaluated on DGL's batches (%s)", s, e)
    held = ["train", *(s for s in evals if isinstance(evals[s], DeviceBatches))]
    log.info("trainer.device_batches: the %s splits on %s, their batches made there", ", ".join(held), device)
    return train, evals


def device_split(run: RunConfig, construction, ds: GraphDataset, device):
    """``ds`` (held graphs) as a ``DeviceSplit`` on ``device``: what the model reads (edge types, roots) and no more;
    refused in one line when its graphs cannot be packed (``device_loaders`` evaluates such a split on DGL's
    batches instead)."""
    from data.batches import PackedGraphs, pack_graphs
    from data.device_batches import DeviceSplit

    graphs = ds.graphs
    packed = graphs.packed if isinstance(graphs, PackedGraphs) else pack_graphs(graphs)
    if packed is None:
        raise ValueError("trainer.device_batches=true: this split's graphs differ in their data keys, set it false")
    model = run.model
    edge_types, root = bool(getattr(model, "edge_types", False)), getattr(model, "readout", "mean") == "root"
    return DeviceSplit(packed, ds.labels, device, construction.dense_complete, edge_types, root)


def build_training(run: RunConfig, data: Data, device: torch.device, world: World) -> Training:
    """The model ``model=`` names (built by its family from ``run.model``, its typed config), and the optimiser
    ``optim=`` names (AdamW or Adagrad) with a linear warmup + cosine (or, ``optim.schedule=linear``, linear) decay
    over every step of the run."""
    core = models.build_model(run.model, data.vocab, data.num_classes, data.construction).to(device)
    ddp_devices = [device] if device.type == "cuda" else None
    model = core if world.size == 1 else DistributedDataParallel(core, device_ids=ddp_devices)
    num_params = sum(p.numel() for p in core.parameters())
    log.info("model: %s, %d parameters, device %s", run.model.name, num_params, device)
    if run.trainer.compile:  # the dense forward compiled on bucketed shapes; evaluation and checkpoints use core
        if world.size > 1:
            raise ValueError("trainer.compile=true trains in one process: drop torchrun, or set trainer.compile=false")
        from engine.compiled import CompiledDense, compile_mode

        model = CompiledDense(core)
        log.info("trainer.compile: dense batches padded to buckets, torch.compile mode %s", compile_mode(device))
    elif run.trainer.device_batches:  # batches made on the device, the eager dense forward
        from engine.compiled import DeviceDense

        model = DeviceDense(core)
    # a model with parameter groups of its own (model=minilm's soft-syntax parameters at a scaled rate) names them
    params = core.param_groups(run.optim.lr) if hasattr(core, "param_groups") else model.parameters()
    # trainer.compile: the fused (GPU) or foreach (CPU) update too
    optimizer = make_optimizer(params, run.optim, device if run.trainer.compile else None)
    total_steps = run.trainer.max_epochs * len(data.train_loader)
    scheduler = make_schedule(optimizer, total_steps, run.optim)
    return Training(core, model, optimizer, scheduler, num_params)


def fit(
    run: RunConfig,
    out_dir: Path,
    world: World,
    devices: Devices,
    data: Data,
    training: Training,
    progress: Progress,
    tracker: Tracker,
) -> None:
    """Epochs ``progress.epoch + 1`` to ``trainer.max_epochs``: train, validate, add a row to metrics.csv and
    save the checkpoints. Only rank 0 writes files."""
    model, core, optimizer, scheduler = training.model, training.core, training.optimizer, training.scheduler
    metrics_path = out_dir / "metrics.csv"
    if world.main:  # the header and the epochs a resumed run holds, replaced whole: a kill from here on keeps them
        write_csv(metrics_path, progress.rows, fieldnames=METRICS)
    with open(metrics_path if world.main else os.devnull, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=METRICS)
        settings = run.epoch_settings(show_progress(run.trainer.progress))
        learner = Learner(model, optimizer, scheduler, devices, settings)  # what a step reads and changes
        meters = Meters(settings, tracker, devices[0], world)  # what an epoch reports
        for epoch in range(progress.epoch + 1, settings.max_epochs + 1):
            t_epoch = time.perf_counter()
            train_loss, train_acc, eps, progress.step = train_epoch(
                learner, data.train_loader, meters, epoch, progress.step
            )
            progress.train_seconds += time.perf_counter() - t_epoch
            progress.seen_examples += len(data.sets["train"])
            preds, labels, val_loss = predict(core, data.eval_loaders["val"], *devices, settings.precision)
            val_acc = (preds == labels).float().mean().item()
            lr, seconds = scheduler.get_last_lr()[0], time.perf_counter() - t_epoch
            writer.writerow(
                dict(zip(METRICS, (epoch, progress.step, lr, train_loss, train_acc, val_loss, val_acc, eps, seconds)))
            )
            f.flush()
            scores = {"train/epoch_loss": train_loss, "train/acc": train_acc, "val/loss": val_loss, "val/acc": val_acc}
            tracker.log({**scores, "train/examples_per_second": eps, "epoch": epoch}, step=progress.step)
            new_best = val_acc > progress.best_val
            if new_best:
                progress.best_val, progress.best_epoch = val_acc, epoch
            progress.epoch = epoch
            if world.main:
                save_checkpoints(run, out_dir, data, training, progress, tracker, new_best)
            log.info(EPOCH_LINE, epoch, train_loss, train_acc, val_loss, val_acc, eps)


def save_checkpoints(
    run: RunConfig, out_dir: Path, data: Data, training: Training, progress: Progress, tracker: Tracker, best: bool
) -> None:
    """checkpoints/last.pt, and best.pt on a new best validation accuracy: each holds all a resume needs."""
    state = {
        **progress.to_dict(),  # best_val_acc, best_epoch, step, train_seconds, seen_examples, epoch
        "model": training.core.state_dict(),
        "optimizer": training.optimizer.state_dict(),
        "scheduler": training.scheduler.state_dict(),
        "rng": rng_state(data.train_loader.rng),
        "wandb_id": tracker.run_id,
        "config": run.resolved,
        "vocab": data.vocab.to_list(),
        "num_classes": data.num_classes,
    }
    for name in ("best.pt", "last.pt") if best else ("last.pt",):
        save_checkpoint(out_dir / "checkpoints" / name, **state)


def test_and_report(
    run: RunConfig,
    out_dir: Path,
    devices: Devices,
    data: Data,
    training: Training,
    progress: Progress,
    tracker: Tracker,
) -> dict:
    """Reload best.pt, score the test split (overall, and by depth, length and root), write results.json."""
    training.core.load_state_dict(load_checkpoint(out_dir / "checkpoints" / "best.pt")["model"])
    precision = run.trainer.precision
    preds, labels, test_loss = predict(training.core, data.eval_loaders["test"], *devices, precision)
    test = summarize(preds, labels, data.sets["test"].meta, data.num_classes)
    acc, best_val, best_epoch = test["accuracy"], progress.best_val, progress.best_epoch
    results = {
        "dataset": run.dataset_cfg.name,
        "graph": run.graph.name,
        "model": run.model.name,
        "num_params": training.num_params,
        "best_val_acc": best_val,
        "best_epoch": best_epoch,
        "test_acc": acc,
        "test_loss": test_loss,
        "epochs": run.trainer.max_epochs,
        "train_seconds": round(progress.train_seconds, 3),
        "examples_per_second": round(progress.seen_examples / progress.train_seconds, 2),
        "device": str(devices[0]),
        "seed": run.seed,
        "num_examples": {s: len(d) for s, d in data.sets.items()},
        "test_by_depth": test.get("by_depth"),
        "test_by_length": test.get("by_length"),
        "test_by_root": test.get("by_root"),
        "wandb_mode": tracker.mode,
        "embeddings": embedding_summary(training.core),  # learned, or GloVe's options and coverage
        # one bit per test example, right or wrong, for paired comparisons (tools.stats)
        "test_predictions": encode_correct(preds, labels, data.sets["test"].fingerprint),
    }
    path = write_json(out_dir / "results.json", results)
    tracker.summary({"test/acc": acc, "test/loss": test_loss, "val/best_acc": best_val})
    log.info("test acc %.4f (best val %.4f at epoch %d) -> %s", acc, best_val, best_epoch, path)
    return results


def run(cfg: DictConfig, out_dir: str | os.PathLike) -> dict:
    """Train, validate, test; write everything under ``out_dir``; return the results dict."""
    run_cfg = check_config(cfg)  # the one parse of cfg: every stage below reads this typed RunConfig
    out_dir = Path(out_dir)
    (out_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    config = run_cfg.resolved
    seed_everything(run_cfg.seed)
    # engine.placement decides the model's device and the graphs'; torchrun's processes, else a world of one
    placement, world = start_devices(run_cfg.device, run_cfg.model.impl)
    devices = placement.devices
    data = build_data(run_cfg, devices, world)  # 1. data
    training = build_training(run_cfg, data, devices[0], world)  # 2. model and optimiser
    resumed = find_resume(run_cfg, out_dir)  # 3. fit, from scratch or from where a checkpoint stopped
    progress = resume(
        resumed, training.core, training.optimizer, training.scheduler, data.train_loader.rng, out_dir / "metrics.csv"
    )
    logger_cfg = config["logger"] if world.main else {**config["logger"], "mode": "disabled"}  # rank 0 logs
    tracker = Tracker(logger_cfg, config, out_dir, run_id=resumed.get("wandb_id") if resumed else None)
    tracker.summary({"model/num_params": training.num_params})
    try:
        fit(run_cfg, out_dir, world, devices, data, training, progress, tracker)
        if not world.main:  # the other processes are done: rank 0 tests and reports
            tracker.finish()
            finish(world)
            return {"best_val_acc": progress.best_val, "rank": world.rank}
        results = test_and_report(run_cfg, out_dir, devices, data, training, progress, tracker)  # 4. test and report
    except BaseException:
        tracker.finish(exit_code=1)
        raise
    tracker.finish()
    finish(world)
    return results


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    results = exit_on_user_error(lambda: run(cfg, HydraConfig.get().runtime.output_dir))
    return results["best_val_acc"]  # what a Hydra sweeper (Optuna) maximises


if __name__ == "__main__":
    main()
