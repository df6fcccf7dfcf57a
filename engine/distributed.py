"""Where a run computes, and with how many processes.

Devices: the model on ``device=auto|cpu|cuda``, its graphs wherever this DGL build can put them.

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

log = logging.getLogger("train")  # train.py's logger: warnings read ``[train]`` in train.log, as they always have
DEVICES = ("auto", "cpu", "cuda")


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
                "CUDA wheel (docs/troubleshooting.md) or use model.impl=dense or model.impl=auto"
            ) from None
        log.warning("this DGL build is CPU-only: graphs stay on the CPU, the model runs dense on %s", device)
        return torch.device("cpu")


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


def start_devices(device: str, impl: str) -> tuple[tuple[torch.device, torch.device], World]:
    """The devices (the model's, the graphs') and the processes a run trains on: under ``torchrun`` on GPUs,
    each process takes the GPU of its local rank; only rank 0 logs below warnings."""
    model_device = pick_device(device)
    world = start(model_device.type == "cuda")
    if model_device.type == "cuda" and world.size > 1:
        model_device = torch.device("cuda", world.local_rank)
        torch.cuda.set_device(model_device)
    if not world.main:  # one log, from rank 0
        logging.getLogger().setLevel(logging.WARNING)
    return (model_device, graph_device(model_device, impl)), world


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
