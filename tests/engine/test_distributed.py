"""2 CPU processes (gloo): sharded batches, averaged gradients, one writer."""

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from data.batches import TrainBatches, collate, make_loader
from data.graph_dataset import GraphDataset
from data.graphs import make_construction
from data.splits import load_splits, num_classes_of
from data.vocab import Vocab
from models import build_model
from tests.conftest import ROOT, compose_config, run_script


@pytest.mark.parametrize("bucket", [True, False])
def test_batches_are_shared_out_evenly(bucket):
    lengths = [(i * 7) % 23 + 1 for i in range(103)]
    one = TrainBatches(lengths, 8, seed=3, bucket=bucket)
    shares = [TrainBatches(lengths, 8, seed=3, bucket=bucket, rank=r, world=3) for r in range(3)]
    whole = list(one)
    parts = [list(s) for s in shares]
    assert [len(p) for p in parts] == [len(s) for s in shares] == [len(shares[0])] * 3  # equal shares
    seen = sorted(i for p in parts for b in p for i in b)
    assert set(seen) == set(range(103))  # every example, some repeated only to even the shares
    assert [b for p in zip(*parts) for b in p][: len(whole)] == whole  # rank r takes every 3rd batch
    assert len(one) == len(whole)


def tiny_train_split(overrides):
    """The training split of a ``debug=tiny`` run as train.py builds it, and the model's config."""
    cfg = compose_config(["debug=tiny", "trainer.progress=false", "logger=none", *overrides])
    splits = load_splits(cfg.dataset, progress=False)
    vocab = Vocab.build(splits["train"]["tokens"])
    construction = make_construction(cfg.graph, vocab, cfg.model)
    train = GraphDataset(splits["train"], vocab, construction, "train", progress=False)
    num_classes = num_classes_of(cfg.dataset, splits)
    model_args = (OmegaConf.to_container(cfg.model, resolve=True), len(vocab), num_classes, construction)
    return cfg, train, model_args


def shards_of(train, cfg, world):
    """Each rank's training loader, as train.py makes it."""
    batch, bucket, seed = int(cfg.trainer.batch_size), bool(cfg.trainer.bucket_by_length), int(cfg.seed)
    return [make_loader(train, batch, True, seed, bucket, rank=r, world=world) for r in range(world)]


def grads(model):
    return {n: None if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()}


def ddp_worker(rank, world, init_file, cfg, train, model_args, state, out_dir):
    """One process of a 2-process gloo group: its share's first batch, through DistributedDataParallel."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        core = build_model(*model_args)
        core.load_state_dict(state)
        core.eval()  # no dropout: every process (and the single one) computes the same function
        g, y = next(iter(shards_of(train, cfg, world)[rank]))  # the repo's own sharding picks the batch
        F.cross_entropy(core(g), y).backward()
        local = grads(core)  # this share's gradient alone, before any all-reduce
        core.zero_grad(set_to_none=True)
        model = DistributedDataParallel(core)  # as train.py wraps it on CPUs
        F.cross_entropy(model(g), y).backward()
        torch.save({"local": local, "synced": grads(core), "labels": y}, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(
    "overrides",
    [["model=transformer", "graph=complete"], ["model=treelstm", "graph=tree"]],
    ids=["transformer-complete", "treelstm-tree"],
)
def test_ddp_gradients_equal_one_process_on_the_whole_batch(overrides, tmp_path):
    """What DDP must guarantee: 2 processes, each with half of a global batch (its share of the epoch, as the
    repo's loader deals it), hold after the all-reduce the gradient one process computes on the whole batch."""
    import torch.multiprocessing as mp

    cfg, train, model_args = tiny_train_split(overrides)
    world = 2
    # the shards: disjoint, together the whole epoch, batch for batch the single process's epoch (2 epochs)
    whole_loader, shards = shards_of(train, cfg, 1)[0], shards_of(train, cfg, world)
    assert len(train) % (world * int(cfg.trainer.batch_size)) == 0  # no batch repeated to even the shares
    for _ in range(2):
        whole = list(whole_loader.batch_sampler)
        parts = [list(loader.batch_sampler) for loader in shards]
        seen = [[i for b in part for i in b] for part in parts]
        assert not set(seen[0]) & set(seen[1])
        assert sorted(seen[0] + seen[1]) == list(range(len(train)))
        assert sorted(parts[0] + parts[1]) == sorted(whole)
    first = [next(iter(batches)) for batches in (loader.batch_sampler for loader in shards_of(train, cfg, world))]
    assert len(first[0]) == len(first[1]) == int(cfg.trainer.batch_size)  # equal halves: mean of means = mean

    torch.manual_seed(0)
    single = build_model(*model_args).eval()
    state = {k: v.clone() for k, v in single.state_dict().items()}
    g, y = collate([train[i] for i in first[0] + first[1]])  # the global batch, in one process
    F.cross_entropy(single(g), y).backward()
    expected = grads(single)

    mp.spawn(ddp_worker, args=(world, tmp_path / "rdzv", cfg, train, model_args, state, tmp_path), nprocs=world)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(world)]
    assert torch.equal(torch.cat([r["labels"] for r in ranks]), y)  # each rank trained on the half it was dealt
    assert expected.keys() == ranks[0]["synced"].keys()
    for name, want in expected.items():
        assert want is not None, f"{name} gets no gradient: DDP as train.py builds it cannot reduce its bucket"
        for r in range(world):
            got = ranks[r]["synced"][name]
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (name, r, (got - want).abs().max().item())
        # the test can fail: each half's own gradient is not the whole batch's, their mean is
        mean = (ranks[0]["local"][name] + ranks[1]["local"][name]) / 2
        assert torch.allclose(mean, want, rtol=1e-5, atol=1e-6), name
    differ = [n for n in expected if not torch.allclose(ranks[0]["local"][n], expected[n], rtol=1e-3, atol=1e-5)]
    assert len(differ) >= len(expected) // 2, differ


def test_torchrun_two_processes(tmp_path):
    from train import run  # here, not at the top: the DDP workers above import this module without train.py

    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        torchrun = shutil.which("torchrun")
    overrides = ["debug=tiny", "trainer.progress=false", "logger=none", "trainer.max_epochs=4", "optim.lr=3e-3"]
    res = subprocess.run(
        [str(torchrun), "--nproc_per_node=2", "train.py", *overrides, f"hydra.run.dir={tmp_path / 'ddp'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    ddp = json.loads((tmp_path / "ddp" / "results.json").read_text())
    single = run(compose_config(overrides), tmp_path / "single")
    with open(tmp_path / "ddp" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"])  # it learns, as one process does
    assert int(rows[-1]["step"]) == single["num_examples"]["train"] // 32 // 2 * 4  # each rank: half the batches
    assert ddp["num_params"] == single["num_params"] and ddp["epochs"] == single["epochs"]
    log = (tmp_path / "ddp" / "train.log").read_text()
    assert log.count("epoch 1:") == 1  # rank 0 alone logs and writes
    # that the processes' gradients are one model's: test_ddp_gradients_equal_one_process_on_the_whole_batch


def test_cluster_launchers_compose_and_run_locally(tmp_path):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=["cluster=slurm", "hydra.launcher.partition=gpu"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher") and cfg.hydra.launcher.partition == "gpu"
    run_script(
        "train.py",
        "-m",
        "cluster=local",
        "debug=tiny",
        "trainer.progress=false",
        "model=gcn,gat",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert sorted(p.parent.name for p in tmp_path.glob("*/results.json")) == ["0_gcn_complete", "1_gat_complete"]


def test_wandb_sweep_keys_all_exist():
    import yaml

    sweep = yaml.safe_load((ROOT / "sweep.yaml").read_text())
    assert "${args_no_hyphens}" in sweep["command"] and sweep["program"] == "train.py"
    for key, spec in sweep["parameters"].items():
        value = spec["values"][-1] if "values" in spec else spec["min"]
        cfg = compose_config([f"{key}={str(value).lower() if isinstance(value, bool) else value}"])
        got = cfg[key].name if key in ("model", "graph") else OmegaConf.select(cfg, key)  # the override took effect
        assert got == value, (key, got, value)
    assert compose_config(["logger.mode=online"]).logger.mode == "online"
