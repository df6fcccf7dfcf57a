"""Does attention find parents beyond position, over the seeds? The one rule (``tools.stats.compare``), paired.

    python -m studies.attention_syntax.seeds docs/results/neural_syntax docs/results/neural_syntax/seed1 \\
        docs/results/neural_syntax/seed2 --out docs/results/neural_syntax/seeds.json

Each folder holds one seed's ``syntax.json`` (``python -m studies.attention_syntax RUN --choose-on val --split
test``), with the head chosen on validation and, per test example, how many of its tokens' parents that head
finds, how many the best fixed offset finds, and how many tokens have a parent. Cell A is the chosen heads (one
per seed: their test scores), cell B the best fixed offset (deterministic: no seed moves it). Both are scored on
the same tokens, so the comparison is paired over the test *examples*: the tokens of one expression are not
independent, and the example is the unit that was sampled.

Token accuracy is a ratio, R = (parents found) / (tokens with a parent), and both its numerator and its
denominator vary with the examples drawn. Each example i (h_i parents found among its t_i) is scored by the
ratio's linearisation, z_i = R + (h_i - R t_i) / t_mean: the mean of the z_i is R exactly, and their variance over
the examples is the ratio estimator's (the delta method). Scaling h_i alone by E / T would hold the denominator
fixed and understate it wherever short and long expressions fare differently, as they do here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from engine.io import write_json
from tools import stats

COMPARED = "chosen parent head - best fixed offset"


def linearised(hits: np.ndarray, parents: np.ndarray) -> np.ndarray:
    """(rows, examples) scores whose mean over the examples is each row's token accuracy and whose variance over
    them is that ratio's (module docstring)."""
    ratio = hits.sum(1, keepdims=True) / parents.sum()
    return ratio + (hits - ratio * parents) / parents.mean()


def seeds_verdict(results: list[dict], names: list[str] | None = None) -> dict:
    """The verdict on the chosen heads against the best fixed offset, over the seeds of ``results`` (one
    ``syntax.json`` each); a ValueError names what is missing or does not match."""
    names = names or [f"seed {k}" for k in range(len(results))]
    for name, r in zip(names, results):
        if "per_example" not in r or not isinstance(r["per_example"]["head_hits"][0], int):
            raise ValueError(
                f"{name}: no per-example counts of the chosen head: analyse it again with "
                "python -m studies.attention_syntax RUN --choose-on val --split test"
            )
        if r.get("chosen_on", r["split"]) == r["split"]:
            raise ValueError(f"{name}: its head was chosen on {r['split']}, the split it reports: use --choose-on val")
    first = results[0]["per_example"]
    for name, r in zip(names[1:], results[1:]):
        kept = r["per_example"]
        if (kept["fingerprint"], kept["parents"], kept["offset_hits"]) != (
            first["fingerprint"],
            first["parents"],
            first["offset_hits"],
        ):
            raise ValueError(f"{name} was scored on other examples than {names[0]}: analyse every seed on one split")
    parents = np.asarray(first["parents"], dtype=float)
    examples, tokens = len(parents), parents.sum()
    hits = np.asarray([r["per_example"]["head_hits"] for r in results], dtype=float)
    for name, r, row in zip(names, results, hits):
        if len(row) != examples or len(first["offset_hits"]) != examples:
            raise ValueError(f"{name}: per-example lists of different lengths: analyse it again")
        if abs(row.sum() / tokens - r["best_parent_head"]["acc"]) > 1e-6:
            raise ValueError(f"{name}: its per-example hits are not its chosen head's ({r['best_parent_head']})")
    heads = linearised(hits, parents)
    offset = linearised(np.asarray(first["offset_hits"], dtype=float)[None, :], parents)
    a = stats.Cell(heads.mean(1), correct=heads, fingerprint=first["fingerprint"])
    b = stats.Cell([offset.mean()], correct=offset, fingerprint=first["fingerprint"], deterministic=True)
    verdict = stats.compare(a, b)
    return {
        "compared": COMPARED,
        "seeds": names,
        "heads": [
            {k: r["best_parent_head"][k] for k in ("layer", "head", "acc")} | {"chosen_on": r["chosen_on"]}
            for r in results
        ],
        "offset": {**results[0]["offset_baselines"]["parent"]},
        "split": results[0]["split"],
        "examples": examples,
        "tokens_with_a_parent": int(tokens),
        "head_acc_mean": float(a.mean),
        **verdict.as_dict(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="one folder per seed, each with its syntax.json")
    parser.add_argument("--out", type=Path, required=True, help="the verdict's JSON")
    args = parser.parse_args(argv)
    try:
        results = [json.loads((folder / "syntax.json").read_text()) for folder in args.folders]
        verdict = seeds_verdict(results, [str(folder) for folder in args.folders])
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    verdict["command"] = "python -m studies.attention_syntax.seeds " + " ".join(
        [*map(str, args.folders), "--out", str(args.out)]
    )
    write_json(args.out, verdict)
    print(
        f"{COMPARED}: {100 * verdict['diff']:+.1f} points (noise {100 * verdict['noise']:.1f}, {verdict['rule']}): "
        f"{verdict['verdict']}; saved {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
