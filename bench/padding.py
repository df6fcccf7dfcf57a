"""How much of a padded (dense) batch is real, with and without length bucketing.

    python -m bench.padding            # the default ListOps training split, batch size 64

Prints, averaged over an epoch's batches: the share of real tokens (sum n / (B * n_max)) and of
real node pairs (sum n^2 / (B * n_max^2)), the work a dense attention layer does for real.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402

from data import listops  # noqa: E402
from data.batches import TrainBatches  # noqa: E402


def shares(lengths: list[int], batch_size: int, bucket: bool, seed: int = 0) -> tuple[float, float]:
    token, pair, batches = 0.0, 0.0, 0
    for batch in TrainBatches(lengths, batch_size, seed, bucket=bucket):
        ns = [lengths[i] for i in batch]
        token += sum(ns) / (len(ns) * max(ns))
        pair += sum(n * n for n in ns) / (len(ns) * max(ns) ** 2)
        batches += 1
    return token / batches, pair / batches


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config").dataset
    stream = listops.generate(
        cfg.num_train,
        seed=cfg.seed,
        max_length=cfg.max_length,
        max_depth=cfg.max_depth,
        p_operator=cfg.p_operator,
        max_args=cfg.max_args,
    )
    lengths = [len(ex["tokens"]) for ex in stream]  # the training split is the stream's first num_train
    print(
        f"ListOps training split: {len(lengths)} expressions of {min(lengths)}-{max(lengths)} tokens, "
        f"batch size {args.batch_size}\n"
    )
    print("| batches | real tokens | real pairs |\n|---|---|---|")
    for bucket in (False, True):
        tok, pair = shares(lengths, args.batch_size, bucket)
        print(f"| {'bucketed by length' if bucket else 'random'} | {tok:.1%} | {pair:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
