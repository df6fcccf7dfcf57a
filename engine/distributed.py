"""Where a run computes, and with how many processes.

Devices: ``engine/placement.py`` decides (the model on ``device=auto|cpu|cuda``, its graphs wherever this
DGL build can put them, the impl); this module starts the processes.

Several processes, one model: ``torchrun --nproc_per_node=N train.py ...`` with PyTorch DDP.

Each process builds the same data (it is deterministic), trains on its own share of every
epoch's batches, and DistributedDataParallel averages gradients. Training metrics are summed
across processes; validation runs whole in each process, so all agree on the best epoch; only
rank 0 writes files and logs to W&B. Backend: gloo on CPUs, nccl on GPUs.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from engine.placement import DEVICES, Placement, pick_device  # noqa: F401  (DEVICES: re-exported)


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


SINGLE = World()  # one process, no process group


def start(use_cuda: bool) -> World:
    """The process group ``torchrun`` describes in the environment, or a world of one."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size == 1:
        return SINGLE
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return World(dist.get_rank(), size, int(os.environ.get("LOCAL_RANK", "0")))


def start_devices(device: str, impl: str) -> tuple[Placement, World]:
    """The placement (the model's device, the graphs': :class:`engine.placement.Placement`) and the
    processes a run trains on: under ``torchrun`` on GPUs, each process takes the GPU of its local rank; only
    rank 0 logs below warnings."""
    model_device = pick_device(device)
    world = start(model_device.type == "cuda")
    if model_device.type == "cuda" and world.size > 1:
        model_device = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(model_device)
    if not world.main:  # one log, from rank 0
        logging.getLogger().setLevel(logging.WARNING)
    return Placement.decide(model_device, impl), world


def all_sum(world: World, *values: float, device=None) -> list[float]:
    """Each value summed over all processes."""
    if world.size == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def finish(world: World) -> None:
    if world.size > 1 and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
