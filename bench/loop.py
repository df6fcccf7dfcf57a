"""The training loop, old against new, side by side in one process: examples/s and their ratios.

    python -m bench.loop                         # the default cases, 3 timed epochs each, on device=auto
    python -m bench.loop --device cuda --epochs 3
    python -m bench.loop --cases gat_complete_64 --card   # the card's command: 15 epochs, train + validation
    python -m bench.loop --device cuda --precisions fp32 bf16   # each case in float32 and in bf16 autocast

Writes ``loop.md`` to ``--out`` (default ``bench/results/<machine>/``, as every benchmark: bench/machine.py).

Each case builds the default ListOps data once (``train.build_data``), then times, after one warm-up epoch, the
old and new loops taking turns (the median of ``--epochs``):

* **loader**: the training batches alone (collated and moved to the graphs' and labels' devices), no model;
* **old epoch**: the loop of 7ef2f89, kept here as the reference: torch DataLoaders, three ``.item()`` reads
  of the device at every step;
* **new epoch**: ``engine.loop.train_epoch`` on ``data.batches.make_loader``'s batches, as ``train.py`` now runs
  it (reads every ``trainer.log_every`` steps; on a GPU a thread collates ahead);
* **validation**: old (a DataLoader collates every epoch) and new (batches collated once, kept).

Both loops start from the same weights and seed; on the CPU they compute the same numbers (tests/engine/test_loop.py).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from bench.machine import add_arguments, invocation, machine_slug, pick_device, results_dir  # noqa: E402
from data.batches import collate  # noqa: E402
from engine.config import check_config  # noqa: E402
from engine.distributed import SINGLE, start_devices  # noqa: E402
from engine.evaluation import predict  # noqa: E402
from engine.loop import PRECISIONS, EpochSettings, Learner, train_epoch  # noqa: E402
from engine.meters import Meters  # noqa: E402
from train import build_data, build_training  # noqa: E402

# name: overrides (the ListOps default data; conf/model/<model>.yaml sizes: the Transformer is d = 64, 4 layers)
CASES = {
    "transformer_complete_64": ["model=transformer", "graph=complete", "trainer.batch_size=64"],
    "transformer_complete_512": ["model=transformer", "graph=complete", "trainer.batch_size=512"],
    "gat_complete_64": ["model=gat", "graph=complete", "trainer.batch_size=64"],
}


class NoTracker:
    """W&B off: the loop's ``tracker.log`` does nothing."""

    def log(self, metrics: dict, step: int) -> None:
        pass


def old_epoch(model, loader, optimizer, scheduler, devices) -> tuple[float, int]:
    """The loop of 7ef2f89 (without its bar and W&B): every step reads the loss twice and the correct count."""
    model.train()
    device, graphs_on = devices
    loss_sum, seen = 0.0, 0
    for g, y in loader:
        g, y = g.to(graphs_on), y.to(device)
        logits = model(g)
        loss = F.cross_entropy(logits, y)
        if not torch.isfinite(loss):
            raise ValueError("loss is not finite")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        optimizer.step()
        scheduler.step()
        loss_sum += loss.item() * len(y)
        (logits.argmax(-1) == y).sum().item()
        seen += len(y)
    return loss_sum / seen, seen


@torch.no_grad()
def old_predict(model, loader, devices) -> float:
    model.eval()
    loss_sum = 0.0
    for g, y in loader:
        g, y = g.to(devices[1]), y.to(devices[0])
        logits = model(g)
        loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        logits.argmax(-1).cpu()
    return loss_sum


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fns: dict, device, repeat: int) -> dict:
    """Median seconds of each ``fn()`` over ``repeat`` rounds, after one warm-up round. The functions take
    turns within a round, so a busy machine slows each alike."""
    times = {name: [] for name in fns}
    for r in range(repeat + 1):
        for name, fn in fns.items():
            sync(device)
            t = time.perf_counter()
            fn()
            sync(device)
            if r:
                times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def build(overrides: list[str], device: str):
    """The config, devices, data and training (model, optimiser, schedule) ``train.py`` builds for ``overrides``
    on ``device`` (W&B and bars off, seed 0), and its epoch settings: what every loop bench times."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides + [f"device={device}", "logger=none", "trainer.progress=false"])
    torch.manual_seed(0)
    run = check_config(cfg)
    placement, world = start_devices(run.device, run.model.impl)
    devices = placement.devices
    data = build_data(run, devices, world)
    training = build_training(run, data, devices[0], world)
    return cfg, devices, data, training, EpochSettings.from_config(cfg, progress=False)


def measure(name: str, overrides: list[str], args) -> dict:
    cfg, devices, data, training, settings = build(overrides, args.device)
    start = copy.deepcopy(training.core.state_dict())
    n = len(data.sets["train"])
    batch = int(cfg.trainer.batch_size)
    old_loader = DataLoader(data.sets["train"], batch_sampler=data.train_loader.batch_sampler, collate_fn=collate)
    old_eval = DataLoader(data.sets["val"], batch_size=int(cfg.trainer.eval_batch_size), collate_fn=collate)
    tracker = NoTracker()

    def loader_only():
        for g, y in data.train_loader:
            g.to(devices[1]), y.to(devices[0], non_blocking=True)

    def old():
        old_epoch(training.core, old_loader, training.optimizer, training.scheduler, devices)

    def new():
        learner = Learner(training.core, training.optimizer, training.scheduler, devices, settings)
        train_epoch(learner, data.train_loader, Meters(settings, tracker, devices[0], SINGLE), 1, 0)

    row = {"case": name, "device": str(devices[0]), "impl": cfg.model.impl, "batch": batch, "examples": n,
           "precision": settings.precision}  # fmt: skip
    row["loader_s"] = timed({"loader": loader_only}, devices[0], args.epochs)["loader"]
    training.core.load_state_dict(start)  # both loops train on from the same weights, taking turns
    row.update({f"{k}_s": v for k, v in timed({"old": old, "new": new}, devices[0], args.epochs).items()})
    row.update(
        {
            f"{k}_val_s": v
            for k, v in timed(
                {
                    "old": lambda: old_predict(training.core, old_eval, devices),
                    "new": lambda: predict(training.core, data.eval_loaders["val"], *devices),
                },
                devices[0],
                args.epochs,
            ).items()
        }
    )
    if args.card:  # the card's command: max_epochs of training and validation, each loop
        epochs = int(cfg.trainer.max_epochs)
        for which, epoch, val in (
            ("old", old, lambda: old_predict(training.core, old_eval, devices)),
            ("new", new, lambda: predict(training.core, data.eval_loaders["val"], *devices)),
        ):
            training.core.load_state_dict(start)
            sync(devices[0])
            t = time.perf_counter()
            for _ in range(epochs):
                epoch()
                val()
            sync(devices[0])
            row[f"card_{which}_s"] = time.perf_counter() - t
    return row


def report(rows: list[dict]) -> str:
    lines = [
        "| case | device | precision | batch | loader alone (s) | old epoch (s) | new epoch (s) | old ex/s | new ex/s "
        "| new / old | old val (s) | new val (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        old_eps, new_eps = r["examples"] / r["old_s"], r["examples"] / r["new_s"]
        lines.append(
            f"| {r['case']} | {r['device']} | {r['precision']} | {r['batch']} | {r['loader_s']:.2f} | {r['old_s']:.2f} | {r['new_s']:.2f} "
            f"| {old_eps:,.0f} | {new_eps:,.0f} | {new_eps / old_eps:.2f}x | {r['old_val_s']:.2f} | {r['new_val_s']:.2f} |"
        )
    for r in rows:
        if "card_old_s" in r:
            lines.append(
                f"\n{r['case']} ({r['precision']}), the card's epochs (train + validation): old {r['card_old_s']:.1f} s, "
                f"new {r['card_new_s']:.1f} s ({r['card_new_s'] / r['card_old_s']:.2f}x the old time)"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)  # --device, --machine, --out
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--epochs", type=int, default=3, help="timed epochs per measurement (median), after one warm-up")
    p.add_argument("--card", action="store_true", help="also the card's whole run: max_epochs of train + validation")
    p.add_argument("--num-train", type=int, default=None, help="a smaller training split (dataset.num_train)")
    p.add_argument(
        "--precisions", nargs="+", default=["fp32"], choices=PRECISIONS, help="trainer.precision of the new loop"
    )
    args = p.parse_args(argv)
    device = pick_device(args.device)
    out = results_dir(args, device)  # a bad --machine stops here, before minutes of timing
    start = time.perf_counter()
    extra = [f"dataset.num_train={args.num_train}"] if args.num_train else []
    rows = []
    for name in args.cases:
        for precision in args.precisions:
            rows.append(measure(name, CASES[name] + extra + [f"trainer.precision={precision}"], args))
            print(report(rows[-1:]).splitlines()[-1], flush=True)
    command = invocation("loop", argv)
    lines = [
        "# The training loop, old (7ef2f89) against new, side by side in one process",
        "",
        f"`{command.strip()}` on {machine_slug(device)} ({os.cpu_count()} CPU cores, torch {torch.__version__}): "
        f"{time.perf_counter() - start:.0f} s. Each time is the median of {args.epochs} epochs after one warm-up; "
        "old and new take turns. The old loop runs in float32 (7ef2f89 had no bf16), so in a bf16 row its ratio "
        "is the loop and the precision together.",
        "",
        report(rows),
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "loop.md").write_text("\n".join(lines) + "\n")
    print()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
