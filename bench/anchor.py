"""The anchor: tagnn's training loop against a plain PyTorch loop of the same model, side by side in one process.

    python -m bench.anchor                                  # batch 64 and 512, fp32 (+ bf16 on a GPU that has it)
    python -m bench.anchor --device cpu --epochs 1 --threads 1
    python -m bench.anchor --device cuda --compile          # + both loops compiled (tagnn: when trainer.compile exists)

Writes ``anchor.md`` to ``--out`` (default ``bench/results/<machine>/``, as every benchmark: bench/machine.py), the
command and the machine's load average at its top.

**tagnn** is ``train.py model=transformer graph=complete`` on the ListOps default data: ``engine.loop.train_epoch``
on ``train.build_data``'s batches (DGL graphs, made by ``data.batches``), as ``bench/loop.py``'s new loop.

**plain** is the same model written as anyone would in stock PyTorch (:class:`PlainTransformer`): an
``nn.TransformerEncoder`` with the same width, depth, heads, feed-forward size, dropouts, pre/post LayerNorm,
sinusoidal positions and mean readout, on padded token tensors kept on the device (:class:`PaddedSplit`: a batch
is indexing), the same training split in the same batches (``data.batches.TrainBatches``, same seed and size,
bucketed by length), AdamW with ``conf/optim/adamw.yaml``'s settings, the same schedule and gradient clipping.
It starts from tagnn's weights (:func:`copy_weights`: equal logits, tests/tools/test_anchor_bench.py), so the
two have the same parameter count, and it reads the device once an epoch (tagnn: every ``trainer.log_every``
steps). With ``--compile`` it is also ``torch.compile``d (CUDA graphs on a GPU, lengths padded up to multiples
of 16 so that few shapes recur; fused AdamW on a GPU).

The loops take turns within each round (A B A B: a busy machine slows each alike); each figure is the median
of ``--epochs`` epochs after one warm-up epoch. The batch table gives the host time to make one training batch:
tagnn's (``Batches.make``, ``PackedGraphs.batch``, the path of graphs read from the cache, and
``DeviceSplit.dense``, the batch ``trainer.device_batches`` makes on the device) and the plain loop's indexing;
the target is under 0.5 ms.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from bench.loop import NoTracker, build, sync, timed  # noqa: E402
from bench.machine import add_arguments, invocation, machine_slug, pick_device, results_dir  # noqa: E402
from data.batches import PackedGraphs, TrainBatches, collate, pack_graphs  # noqa: E402
from data.device_batches import DeviceSplit  # noqa: E402
from engine.distributed import SINGLE  # noqa: E402
from engine.loop import PRECISIONS, Learner, make_schedule, train_epoch  # noqa: E402
from engine.meters import Meters  # noqa: E402
from models.encoder import sinusoidal_encoding  # noqa: E402

OVERRIDES = ["model=transformer", "graph=complete"]  # tagnn's default model on its default data (ListOps)
BUCKET = 16  # compiled: a batch's length is padded up to a multiple of this, so at most max_length / 16 shapes
TARGET_MS = 0.5  # issue 48: host time to make one batch
BACKEND = "inductor"  # torch.compile's backend for the plain model (tests: "aot_eager", which generates no code)


# ---- the plain model ----
class PlainTransformer(nn.Module):
    """tagnn's ``model=transformer graph=complete`` in stock PyTorch: embed + sinusoidal PE, dropout,
    ``nn.TransformerEncoder`` (GELU feed-forward; dropout on both residual branches, none on the attention
    weights or inside the feed-forward, as tagnn's Block), the final LayerNorm when pre-LN, the mean over the
    tokens, a linear classifier. ``forward(tok (B, n), pad (B, n) True at padding) -> logits (B, C)``."""

    def __init__(self, model_cfg, vocab_size: int, num_classes: int, max_len: int):
        super().__init__()
        unsupported = {
            k: model_cfg[k]
            for k, want in (("positional", "sinusoidal"), ("readout", "mean"), ("ffn", True), ("share_weights", False),
                            ("edge_types", False), ("update", "residual"), ("scaled", True), ("embeddings", "learned"))
            if model_cfg.get(k, want) != want
        }  # fmt: skip
        if unsupported or model_cfg.name != "transformer":
            raise ValueError(
                f"the plain anchor is model=transformer's defaults only; not {unsupported or model_cfg.name}"
            )
        d, pre = int(model_cfg.hidden_dim), model_cfg.norm == "pre"
        self.embed = nn.Embedding(vocab_size, d)
        self.register_buffer("pe", sinusoidal_encoding(torch.arange(max_len), d), persistent=False)  # (max_len, d)
        self.embed_dropout = nn.Dropout(float(model_cfg.dropout))
        layer = nn.TransformerEncoderLayer(
            d, int(model_cfg.num_heads), int(model_cfg.ffn_mult) * d, float(model_cfg.dropout),
            activation="gelu", batch_first=True, norm_first=pre,
        )  # fmt: skip
        layer.self_attn.dropout = float(model_cfg.attn_dropout)  # on the attention weights (tagnn: attn_dropout)
        layer.dropout = nn.Dropout(0.0)  # inside the feed-forward: tagnn has none there
        self.encoder = nn.TransformerEncoder(
            layer, int(model_cfg.num_layers), norm=nn.LayerNorm(d) if pre else None, enable_nested_tensor=False
        )
        self.classifier = nn.Linear(d, num_classes)

    def forward(self, tok: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = self.embed_dropout(self.embed(tok) + self.pe[: tok.shape[1]])  # (B, n, d)
        x = self.encoder(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(x.dtype)  # (B, n, 1)
        return self.classifier((x * keep).sum(1) / keep.sum(1).clamp(min=1))  # (B, C)


@torch.no_grad()
def copy_weights(plain: PlainTransformer, core: nn.Module) -> None:
    """tagnn's weights into the plain model (q, k, v stacked into ``in_proj``): the same function after."""
    plain.embed.weight.copy_(core.embed.weight)
    for layer, block in zip(plain.encoder.layers, core.layers(), strict=True):
        a = block.aggregator
        layer.self_attn.in_proj_weight.copy_(torch.cat([a.query.weight, a.key.weight, a.value.weight]))
        layer.self_attn.in_proj_bias.copy_(torch.cat([a.query.bias, a.key.bias, a.value.bias]))
        pairs = [(layer.self_attn.out_proj, a.out), (layer.linear1, block.ffn[0]), (layer.linear2, block.ffn[2]),
                 (layer.norm1, block.norm1), (layer.norm2, block.norm2)]  # fmt: skip
        for mine, theirs in pairs:
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
    if plain.encoder.norm is not None:
        plain.encoder.norm.weight.copy_(core.final_norm.weight)
        plain.encoder.norm.bias.copy_(core.final_norm.bias)
    plain.classifier.weight.copy_(core.classifier.weight)
    plain.classifier.bias.copy_(core.classifier.bias)


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---- the plain data: padded tensors on the device ----
class PaddedSplit:
    """A split as padded tensors on ``device``: token ids (N, L), lengths, labels; ``batch(indices)`` is indexing
    on the device (the lengths are also kept on the host, to cut a batch to its longest example without a read)."""

    def __init__(self, ds, device: torch.device, bucket: int = 0):
        ids = ds.ids
        self.lengths_host = torch.tensor([len(r) for r in ids])
        self.bucket, self.device = bucket, device
        width = int(self.lengths_host.max())
        width = -(-width // bucket) * bucket if bucket else width
        tokens = torch.zeros(len(ids), width, dtype=torch.long)
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        self.tokens, self.lengths = tokens.to(device), self.lengths_host.to(device)
        self.labels, self.arange = ds.labels.to(device), torch.arange(width, device=device)
        self.width = width

    def batch(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(tok (B, n), pad (B, n), labels (B,))``, n the batch's longest example (rounded up to the bucket)."""
        host = torch.tensor(indices)
        n = int(self.lengths_host[host].max())
        if self.bucket:
            n = -(-n // self.bucket) * self.bucket
        idx = host.to(self.device, non_blocking=True)
        return self.tokens[idx, :n], self.arange[:n] >= self.lengths[idx, None], self.labels[idx]


@dataclasses.dataclass
class Plain:
    """One plain loop: model (eager or compiled), its data, batches, optimiser and schedule."""

    model: nn.Module
    split: PaddedSplit
    sampler: TrainBatches
    optimizer: torch.optim.Optimizer
    scheduler: object
    grad_clip: float | None

    def epoch(self, precision: str) -> tuple[float, float]:
        """One pass over the training split; mean loss and accuracy (read from the device once, at the end)."""
        self.model.train()
        device = self.split.device
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        correct = torch.zeros((), dtype=torch.int64, device=device)
        seen = 0
        for indices in self.sampler:
            tok, pad, y = self.split.batch(indices)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
                logits = self.model(tok, pad)
                loss = F.cross_entropy(logits, y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip or float("inf"))
            self.optimizer.step()
            self.scheduler.step()
            loss_sum += loss.detach().double() * len(indices)
            correct += (logits.argmax(-1) == y).sum()
            seen += len(indices)
        return loss_sum.item() / seen, correct.item() / seen


def make_plain(cfg, data, core, device: torch.device, compiled: bool, compile_mode: str | None) -> Plain:
    """The plain loop of ``cfg`` (tagnn's config), starting from ``core``'s weights."""
    bucket = BUCKET if compiled else 0
    split = PaddedSplit(data.sets["train"], device, bucket)
    model = PlainTransformer(cfg.model, len(data.vocab), data.num_classes, split.width).to(device)
    if num_params(model) != num_params(core):  # not the same model: its figures would not be an anchor
        raise SystemExit(f"error: the plain model has {num_params(model):,} parameters, tagnn's {num_params(core):,}")
    copy_weights(model, core)
    o, t = cfg.optim, cfg.trainer
    if o.name != "adamw":
        raise ValueError(f"the plain anchor trains with AdamW; optim={o.name}")
    fused = {"fused": True} if compiled and device.type == "cuda" else {}
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=float(o.lr), betas=tuple(o.betas), weight_decay=float(o.weight_decay), **fused
    )
    sampler = TrainBatches(data.sets["train"].sizes, int(t.batch_size), int(cfg.seed), bool(t.bucket_by_length))
    scheduler = make_schedule(optimizer, int(t.max_epochs) * len(sampler), o)
    if compiled:  # torch.compile's defaults: shapes static at first, dynamic once a second one is seen
        options = {"mode": compile_mode} if BACKEND == "inductor" else {}
        model = torch.compile(model, backend=BACKEND, **options)
    return Plain(model, split, sampler, optimizer, scheduler, o.grad_clip)


# ---- host time to make one batch ----
def batch_times(data, batch_size: int, seed: int, plain_split: PaddedSplit, limit: int) -> dict:
    """Median host milliseconds to make one training batch (the first ``limit`` batches of an epoch, each timed):
    tagnn's ``Batches.make`` (the path this run takes), ``PackedGraphs.batch`` (graphs read from the cache),
    ``DeviceSplit.dense`` (``trainer.device_batches``) and the plain loop's indexing on the device (host time:
    issued, not waited for)."""
    ds = data.sets["train"]
    order = list(TrainBatches(ds.sizes, batch_size, seed, True))[:limit]
    loader = data.train_loader
    make = loader.make if hasattr(loader, "make") else (lambda idx: collate([ds[i] for i in idx]))
    graphs = ds.graphs if isinstance(ds.graphs, PackedGraphs) else None
    if graphs is None and isinstance(ds.graphs, list):
        packed = pack_graphs(ds.graphs)
        graphs = PackedGraphs(packed) if packed is not None else None
    fns = {"tagnn_make": make, "plain_make": plain_split.batch}
    if graphs is not None:
        fns["packed_batch"] = lambda idx: graphs.batch(list(idx))
        # trainer.device_batches: the split kept on the device, a batch made there by indexing (eager: flat too)
        split = DeviceSplit(graphs.packed, ds.labels, plain_split.device, data.construction.dense_complete)
        fns["device_batch"] = lambda idx: split.dense(idx, flat=True)
    out = {}
    for name, fn in fns.items():
        fn(order[0])  # warm-up
        ts = []
        for idx in order:
            t = time.perf_counter()
            fn(idx)
            ts.append(time.perf_counter() - t)
        out[name] = 1e3 * statistics.median(ts)
    sync(plain_split.device)
    out["path"] = "cached graphs" if isinstance(ds.graphs, PackedGraphs) else "built graphs"
    return out


# ---- the bench ----
def has_compile(cfg) -> bool:
    """Whether this checkout's tagnn can compile its step (``trainer.compile``, issue 48 item 2)."""
    return "compile" in cfg.trainer


def measure(batch_size: int, args, device: torch.device) -> list[dict]:
    """Rows for one batch size: each precision, eager (and compiled), tagnn against plain, taking turns."""
    extra = [f"trainer.batch_size={batch_size}"] + ([f"dataset.num_train={args.num_train}"] if args.num_train else [])
    cfg, devices, data, training, settings = build(OVERRIDES + extra, args.device)
    torch._dynamo.reset()  # each batch size compiles afresh (and within the cache's limit)
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 32)  # precisions x shapes
    core, n = training.core, len(data.sets["train"])
    tagnn_compiled = None
    if args.compile and has_compile(cfg):  # tagnn's own compiled step, from the same weights
        _, _, _, tagnn_compiled, _ = build(OVERRIDES + extra + ["trainer.compile=true"], args.device)
        tagnn_compiled.core.load_state_dict(core.state_dict())
    mode = args.compile_mode or ("reduce-overhead" if device.type == "cuda" else None)
    plains = {"eager": make_plain(cfg, data, core, devices[0], False, None)}
    if args.compile:
        plains["compiled"] = make_plain(cfg, data, core, devices[0], True, mode)
    params = {"tagnn": num_params(core), "plain": num_params(plains["eager"].model)}
    timing = batch_times(data, batch_size, int(cfg.seed), plains["eager"].split, args.batch_limit)
    tracker, rows = NoTracker(), []
    for precision in args.precisions:
        run_as = dataclasses.replace(settings, precision=precision)

        def tagnn(t=training):
            learner = Learner(t.model, t.optimizer, t.scheduler, devices, run_as)
            train_epoch(learner, data.train_loader, Meters(run_as, tracker, devices[0], SINGLE), 1, 0)

        fns = {"tagnn eager": tagnn, "plain eager": lambda: plains["eager"].epoch(precision)}
        if args.compile:
            if tagnn_compiled is not None:
                fns["tagnn compiled"] = lambda: tagnn(tagnn_compiled)
            fns["plain compiled"] = lambda: plains["compiled"].epoch(precision)
        failed = {}
        for name in list(fns):  # a compile that fails is reported, not fatal (a lent GPU's minutes are few)
            if "compiled" in name:
                fn = fns[name]

                def guarded(fn=fn, name=name):
                    if name not in failed:
                        try:
                            fn()
                        except Exception as e:  # noqa: BLE001
                            failed[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"

                fns[name] = guarded
        seconds = timed(fns, devices[0], args.epochs)
        eps = {k: (n / s if k not in failed else None) for k, s in seconds.items()}
        for kind in ("eager", "compiled") if args.compile else ("eager",):
            tagnn_name = f"tagnn {kind}" if f"tagnn {kind}" in eps else "tagnn eager"
            rows.append({
                "batch": batch_size, "precision": precision, "mode": kind, "device": str(devices[0]),
                "impl": cfg.model.impl, "tagnn_as": tagnn_name, "tagnn_eps": eps[tagnn_name],
                "plain_eps": eps[f"plain {kind}"], "failed": {k: v for k, v in failed.items() if kind in k},
                "examples": n, "params": params, "timing": timing,
            })  # fmt: skip
    return rows


def fmt_eps(x) -> str:
    return "failed" if x is None else f"{x:,.0f}"


def report(rows: list[dict]) -> str:
    lines = [
        "| batch | precision | loops | tagnn ex/s | plain ex/s | tagnn / plain |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r['tagnn_eps'] / r['plain_eps']:.2f}" if r["tagnn_eps"] and r["plain_eps"] else "–"
        loops = r["mode"] if r["tagnn_as"].endswith(r["mode"]) else f"tagnn eager, plain {r['mode']}"
        lines.append(
            f"| {r['batch']} | {r['precision']} | {loops} | {fmt_eps(r['tagnn_eps'])} | {fmt_eps(r['plain_eps'])} | {ratio} |"
        )
    for r in rows:
        for name, err in r["failed"].items():
            lines.append(f"\n{name} (batch {r['batch']}, {r['precision']}) failed: {err}")
    lines += [
        "",
        f"Host time to make one training batch (median ms; target under {TARGET_MS} ms):",
        "",
        "| batch | tagnn `Batches.make` (ms) | its graphs | `PackedGraphs.batch` (ms) | plain indexing (ms) "
        "| tagnn under the target | `DeviceSplit.dense` (ms, `trainer.device_batches`) | it under the target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    seen = set()
    for r in rows:
        if r["batch"] in seen:
            continue
        seen.add(r["batch"])
        t = r["timing"]
        packed = f"{t['packed_batch']:.2f}" if "packed_batch" in t else "–"
        under = "yes" if t["tagnn_make"] < TARGET_MS else "no"
        device = f"{t['device_batch']:.3f}" if "device_batch" in t else "–"
        device_under = ("yes" if t["device_batch"] < TARGET_MS else "no") if "device_batch" in t else "–"
        lines.append(
            f"| {r['batch']} | {t['tagnn_make']:.2f} | {t['path']} | {packed} | {t['plain_make']:.3f} | {under} "
            f"| {device} | {device_under} |"
        )
    p = rows[0]["params"]
    same = "equal" if p["tagnn"] == p["plain"] else f"differ by {p['plain'] - p['tagnn']:+,}"
    lines += ["", f"Parameters: tagnn {p['tagnn']:,}, plain {p['plain']:,} ({same})."]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)  # --device, --machine, --out
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[64, 512])
    p.add_argument("--epochs", type=int, default=3, help="timed epochs per loop (median), after one warm-up")
    p.add_argument("--precisions", nargs="+", default=None, choices=PRECISIONS,
                   help="default: fp32, and bf16 on a GPU that supports it")  # fmt: skip
    p.add_argument("--compile", action="store_true", help="also the compiled loops (torch.compile)")
    p.add_argument("--compile-mode", default=None, help="torch.compile's mode (default: reduce-overhead on a GPU)")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    p.add_argument("--num-train", type=int, default=None, help="a smaller training split (dataset.num_train)")
    p.add_argument("--batch-limit", type=int, default=50, help="batches timed for the host batch time")
    args = p.parse_args(argv)
    device = pick_device(args.device)
    out = results_dir(args, device)  # a bad --machine stops here, before minutes of timing
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.precisions is None:
        bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        args.precisions = ["fp32", "bf16"] if bf16 else ["fp32"]
    load = os.getloadavg()
    start = time.perf_counter()
    command = invocation("anchor", argv)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for batch_size in args.batch_sizes:  # the file is rewritten after each: a run cut off keeps what finished
        rows += measure(batch_size, args, device)
        print(report(rows).split("\n\n")[0], flush=True)
        lines = [
            "# tagnn's training loop against plain PyTorch, side by side in one process",
            "",
            f"`{command.strip()}`",
            "",
            f"On {machine_slug(device)} ({os.cpu_count()} CPU cores, torch {torch.__version__}, "
            f"{torch.get_num_threads()} torch threads): {time.perf_counter() - start:.0f} s. Load average (1 min) "
            f"{load[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end. `model=transformer graph=complete` on "
            f"ListOps ({rows[0]['examples']:,} training examples; tagnn's impl={rows[0]['impl']} on {rows[0]['device']}). "
            f"Each figure is the median of {args.epochs} epoch(s) after one warm-up; the loops take turns (A B A B). "
            "Compiled plain batches are padded to multiples of 16. A row 'tagnn eager, plain compiled' means this "
            "checkout's tagnn has no compiled step (trainer.compile).",
            "",
            report(rows),
        ]
        (out / "anchor.md").write_text("\n".join(lines) + "\n")
    print()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
