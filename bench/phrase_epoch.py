"""What an epoch of phrase-level training costs, before anyone plans one (issue 33's SST-5 target).

    python -m bench.phrase_epoch --data-dir ../shared/data/sst      # -> bench/results/<machine>/phrase_epoch.md
    python -m bench.phrase_epoch --data-dir DIR --quick --out TMP    # a few batches: checks the script only

``dataset.train_phrases=true`` turns SST-5's 8,544 training sentences into every labelled phrase of their
trees, each once (``data.text.phrase_rows``). Phrases are many and short, so neither the example count nor
the word count alone says what an epoch costs. This measures it side by side: batches of 32 drawn at random
from the sentences and from the phrases, each turned into MiniLM's complete graph over its word pieces as a
training run does, one training step each (forward, cross-entropy, backward) on the fine-tuning model,
interleaved so both see the same load; the median step of each, times the batches of an epoch, is the
epoch's estimate. The ratio of the two epochs is the number to plan with (a run's wall time varies with
the load on the machine; the ratio much less).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import dgl  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import yaml  # noqa: E402

from bench.machine import add_arguments, pick_device, results_dir  # noqa: E402
from data.text import load_text_splits  # noqa: E402
from data.wordpiece import piece_graph  # noqa: E402
from models.minilm import build_minilm, load_wordpiece  # noqa: E402

BATCH = 32


def splits(data_dir: str, phrases: bool) -> dict:
    """SST-5's parsed splits as ``conf/dataset/sst.yaml`` sets them (the parse cache of a training run), with the
    phrases for training or not."""
    cfg = yaml.safe_load((ROOT / "conf" / "dataset" / "sst.yaml").read_text())
    return load_text_splits({**cfg, "data_dir": data_dir, "train_phrases": phrases}, progress=False)


def batch(wordpiece, rows, idx: list[int]) -> tuple[dgl.DGLGraph, torch.Tensor]:
    graphs = [piece_graph(wordpiece.pieces(rows[i]["tokens"]), "complete") for i in idx]
    return dgl.batch(graphs), torch.tensor([rows[i]["label"] for i in idx])


def step_seconds(model, g: dgl.DGLGraph, labels: torch.Tensor) -> float:
    start = time.perf_counter()
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(g), labels).backward()
    return time.perf_counter() - start


def measure(data_dir: str, repeat: int, seed: int = 0) -> dict:
    sentences, phrases = splits(data_dir, False)["train"], splits(data_dir, True)["train"]
    wordpiece, model = load_wordpiece(), build_minilm({}, 5).train()
    rng = random.Random(seed)
    pieces = {"sentences": [], "phrases": []}
    times = {"sentences": [], "phrases": []}
    for k in range(repeat + 1):  # the first round warms up
        for name, rows in (("sentences", sentences), ("phrases", phrases)):
            g, labels = batch(wordpiece, rows, rng.sample(range(len(rows)), min(BATCH, len(rows))))
            seconds = step_seconds(model, g, labels)
            if k:
                times[name].append(seconds)
                pieces[name].append(g.num_nodes())
    out = {"repeat": repeat, "load": os.getloadavg()[0]}
    for name, rows in (("sentences", sentences), ("phrases", phrases)):
        median = statistics.median(times[name])
        steps = math.ceil(len(rows) / BATCH)
        out[name] = {
            "examples": len(rows),
            "pieces_per_batch": statistics.mean(pieces[name]),
            "step_s": median,
            "steps": steps,
            "epoch_min": steps * median / 60,
        }
    return out


def markdown(m: dict, machine: str, command: str) -> str:
    s, p = m["sentences"], m["phrases"]
    lines = [
        f"# An epoch of SST-5's phrases against an epoch of its sentences ({machine})",
        "",
        f"Produced by `{command}` (bench/phrase_epoch.py): MiniLM fine-tuning steps (batch {BATCH}, complete graph "
        f"over word pieces, forward + cross-entropy + backward), sentence and phrase batches interleaved, median "
        f"of {m['repeat']} each; load average {m['load']:.1f} at the end.",
        "",
        "| training set | examples | word pieces per batch | median step (s) | steps per epoch | epoch (min) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in (("sentences", s), ("phrases (dataset.train_phrases=true)", p)):
        lines.append(
            f"| {name} | {r['examples']:,} | {r['pieces_per_batch']:.0f} | {r['step_s']:.3f} | {r['steps']:,} "
            f"| {r['epoch_min']:.1f} |"
        )
    lines += ["", f"An epoch of phrases costs **{p['epoch_min'] / s['epoch_min']:.1f}×** an epoch of sentences.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/sst", help="the folder of SST's train/dev/test.txt")
    parser.add_argument("--repeat", type=int, default=30, help="steps of each kind (after one warm-up each)")
    parser.add_argument("--quick", action="store_true", help="3 steps each: checks the script, measures nothing")
    add_arguments(parser)
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    if device.type != "cpu":
        raise SystemExit("error: bench.phrase_epoch measures the CPU only (MiniLM's package does not travel to a GPU)")
    m = measure(args.data_dir, 3 if args.quick else args.repeat)
    out = results_dir(args, device)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m bench.phrase_epoch" + (f" --data-dir {args.data_dir}" if args.data_dir else "")
    text = markdown(m, args.machine or out.name, command)
    (out / "phrase_epoch.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
