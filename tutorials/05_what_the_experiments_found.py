# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Part 5 — What the experiments found
#
# Parts 1–4 built the pieces: attention as message passing, one encoder with swappable aggregators,
# graphs as data, and two implementations of the same function. The experiments put questions from
# the essay (Joshi, 2020) to ListOps (Nangia & Bowman, 2018), whose gold trees make the "which graph?"
# question clean:
#
# * Is the complete graph the best input, or does the gold tree help? (Kipf & Welling, 2017;
#   Veličković et al., 2018; Vaswani et al., 2017 as the three aggregators.)
# * Does attention beat fixed reductions? How many heads, how many layers?
# * Can structure enter as a positional encoding instead (Dwivedi et al., 2020)?
#
# Each experiment is a Hydra config in `conf/experiment/`. This part lists them with the command that
# runs each, prints any result tables committed under `docs/results/`, and then trains two tiny models
# in-process to show the machinery end to end.

# %%
import os
import sys
from pathlib import Path

# the repository root, above this script (or, in Jupyter, above the working directory)
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
ROOT = next(p for p in (HERE, *HERE.parents) if (p / "models" / "aggregators.py").is_file())
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ.setdefault("WANDB_MODE", "disabled")  # nothing here talks to W&B
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import logging  # noqa: E402
import tempfile  # noqa: E402

import yaml  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

EXPERIMENTS = sorted((ROOT / "conf" / "experiment").glob("*.yaml"))
RESULTS = sorted((ROOT / "docs" / "results").glob("*.md"))
print(f"{len(EXPERIMENTS)} experiment configs in conf/experiment/, {len(RESULTS)} result tables in docs/results/")

# %% [markdown]
# ## 1. The experiments and how to run them
#
# Every file starts with a comment that states the question and gives the command. A multirun
# (`-m`) sweeps the values under `hydra.sweeper.params` and writes one directory per run under
# `hydra.sweep.dir`. `make experiment E=<name>` runs a sweep and turns its `results.json` files into
# `docs/results/<name>.md` and plots in `docs/figures/`; `make report DIR=...` writes the same next to any sweep.


# %%
def header(path: Path) -> list[str]:
    """The leading comment of a config, without Hydra's ``# @package`` directive."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            lines.append(line.removeprefix("#").removeprefix(" ").rstrip())
    return lines


for path in EXPERIMENTS:
    cfg = yaml.safe_load(path.read_text()) or {}
    params = ((cfg.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    print(f"=== experiment={path.stem}")
    for line in header(path):
        print(f"  {line}")
    if params:
        grid = " x ".join(f"{key} in {{{value}}}" for key, value in params.items())
        print(f"  sweeps: {grid}")
    print()

# %% [markdown]
# ## 2. What they found
#
# All on generated ListOps, from one seed each, with test sets of 1,000 expressions. Differences
# below about 4.5 points are noise. The README's "The essay as experiments" section has every table,
# plot and command.
#
# * **graph_choice.** The complete graph is not the best input: the gold tree beats it for every
#   model (Transformer 0.625 vs 0.478; over 3 seeds 0.613 ± 0.019 vs 0.480 ± 0.003); the gap
#   opens at depth 2 and stays.
# * **graph_choice_depth.** Tied weights let message passing go deeper for free. On trees,
#   accuracy goes from 0.581 with 2 layers to 0.612 with 8 (within noise), then stays there. On the complete
#   graph it is flat at 0.476–0.483.
# * **neural_syntax.** A Transformer trained on complete graphs does not find parents better than
#   position does. Its best head points at the parent for 22.2% of tokens, against 22.4% for "the
#   token just before". It does put up to 2.4 times the uniform share of its attention on tree
#   neighbours.
# * **heads.** 1, 2, 4 or 8 heads at equal width score the same (0.474–0.482). After training,
#   with 9 of the 8-head model's 32 heads masked, test accuracy is 0.470 (full: 0.474) and
#   validation accuracy 0.462 (full: 0.493).
# * **aggregation.** Attention beats fixed reductions (on trees 0.625, against 0.520–0.560 for
#   sum, mean and max). Max is the best reduction, and sum the worst.
# * **training.** At the default learning rate, pre- vs post-LN, warmup and scaling hardly matter
#   (0.440–0.484). At ten times that rate, post-LN stays at chance (0.101) with or without
#   warmup, while pre-LN trains (0.415–0.446), as Xiong et al. (2020) explain.
# * **positional.** Laplacian and random-walk encodings of the tree add nothing over no positions
#   (on the complete graph 0.405 and 0.408, against 0.398). Sinusoidal order is what helps
#   (0.478), even on the tree (0.625 vs 0.470).
#
# The committed tables themselves (`docs/results/*.md`, written by `make experiment E=<name>`):

# %%
if RESULTS:
    for path in RESULTS:
        print(f"--- {path.relative_to(ROOT)} ---")
        print(path.read_text().strip())
        print()
else:
    print("no result tables committed under docs/results/ yet. To produce one:")
    for path in EXPERIMENTS:
        cfg = yaml.safe_load(path.read_text()) or {}
        sweep_dir = ((cfg.get("hydra") or {}).get("sweep") or {}).get("dir")
        if sweep_dir:
            print(f"  make experiment E={path.stem}")
        else:  # a single run with its own analysis: the header gives the command
            commands = [line.strip() for line in header(path) if "python" in line]
            print(f"  {commands[-1] if commands else f'python train.py experiment={path.stem}'}")

readme = (ROOT / "README.md").read_text().splitlines()
if "**Test accuracy**" in readme:
    start = readme.index("**Test accuracy**")
    table = [line for line in readme[start + 1 : start + 8] if line.startswith("|")]
    print("\nthe README's test accuracy, every model x graph (full ListOps runs):")
    print("\n".join(table))

# %% [markdown]
# ## 3. A tiny run, in process
#
# `train.py`'s `run(cfg, out_dir)` is the whole pipeline: generate ListOps, build the graphs, train,
# keep the best checkpoint by validation accuracy, test it, and write `results.json`,
# `metrics.csv` and checkpoints under `out_dir`. Here it is called from Python with a config composed
# by Hydra's compose API, exactly what `python train.py debug=tiny graph=...` would see, once with the
# gold tree and once with the complete graph. Outputs go to a temporary directory.
#
# `debug=tiny` means 256 training sentences of at most 40 tokens, a 2-layer model of width 32 and
# 2 epochs: seconds, not minutes. **Nothing can be concluded from these two numbers**: on 64 test
# sentences, a difference of a few examples is noise. The real comparison (6,000 training sentences,
# 15 epochs, 1,000 test sentences) is the README table printed above.

# %%
from train import run  # noqa: E402

logging.basicConfig(level=logging.WARNING)
OVERRIDES = ["debug=tiny", "trainer.progress=false", "logger=none", "device=cpu"]
results = {}
with tempfile.TemporaryDirectory(prefix="tagnn-tutorial-") as tmp:
    for graph in ("tree", "complete"):
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(config_name="config", overrides=OVERRIDES + [f"graph={graph}"])
        results[graph] = run(cfg, Path(tmp) / graph)
        written = sorted(p.name for p in (Path(tmp) / graph).iterdir())
        print(f"graph={graph}: wrote {', '.join(written)}")

print(f"\n{'graph':9s} {'params':>7s} {'best val':>9s} {'test acc':>9s} {'train s':>8s} {'ex/s':>7s}")
for graph, r in results.items():
    print(
        f"{graph:9s} {r['num_params']:7d} {r['best_val_acc']:9.3f} {r['test_acc']:9.3f} "
        f"{r['train_seconds']:8.1f} {r['examples_per_second']:7.0f}"
    )
test_size = results["tree"]["num_examples"]["test"]
print(f"(test set: {test_size} sentences, so one sentence moves the accuracy by {1 / test_size:.3f})")

# %% [markdown]
# ## Where to go from here
#
# * Rerun any experiment above; each takes minutes to tens of minutes on a CPU
#   (`trainer.progress=true` shows progress bars).
# * Try a graph or aggregator of your own: a construction is a function returning `(src, dst)` in
#   `data/graphs.py`, an aggregator a module with `forward(g, h)` and `forward_dense(h, dg)` in
#   `models/aggregators.py`; `tests/test_dense.py` tells you whether the two agree.
# * Read the essay again with the code at hand: every equation in it is a line you can now point to.

# %%
print(f"part 5 done: tiny runs finished for {', '.join(results)}")
