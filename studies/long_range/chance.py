"""The most frequent answer on the ListOps test sets: what a model that learned only the label counts scores.

    python -m studies.long_range.chance     # docs/results/long_range_chance.json and .md (seconds)

Each set is made again by the code that made it for the runs, and checked against the counts their records
kept before anything is written:

  long_train test, validation, training
                    ``experiment=long_train``'s splits (``dataset=listops_long``, 2,000 / 200 / 1,000, data
                    seed 0), composed as ``train.py`` composes them; the test split's expressions per root
                    operator and per length are checked against every record of docs/results/runs/long_train.jsonl;
  LRA 101-500, LRA 501-1999
                    the long sets of ``studies.long_range`` (``SETS``: 1,000 expressions each, their seeds),
                    checked against the expressions per length that docs/results/long_range_lengths.json kept;
  essay suite test  the 10,000 test expressions of every full-scale essay experiment (``scale=full``,
                    ``dataset=listops_full``), composed as ``experiment=graph_choice_depth`` composes them, and
                    checked against the split fingerprint that each of docs/results/runs/graph_choice_depth.jsonl's
                    records kept with its test predictions (tokens and label of every example, in order).
                    Every record of docs/results/runs/ scored on that split is then read for runs right on
                    every expression of one label and on no other, as a model that always answers that label
                    is (``one_label_runs``: a run that learned only the label counts, or less).

Always answering a set's most frequent label scores that label's share of the set: the accuracy to beat
before a model is said to have learned more than the label counts.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np

from engine.evaluation import length_bucket
from studies.long_range import CHANCE_COMMAND as COMMAND
from studies.long_range import CHANCE_JSON as OUT
from studies.long_range import LRA, ROOT, SETS, chance_markdown, digest, scored_on

LONG_TRAIN_RECORDS = Path("docs/results/runs/long_train.jsonl")
LENGTHS = Path("docs/results/long_range_lengths.json")
ESSAY_RECORDS = Path("docs/results/runs/graph_choice_depth.jsonl")  # full-scale runs that kept the fingerprint
ESSAY_EXPERIMENT = "graph_choice_depth"
NUM = 1000  # expressions per studies.long_range set (its --num, as the committed table was scored)


def counts(labels) -> dict[str, int]:
    """Expressions per label, every label 0-9 named."""
    from data.listops import NUM_CLASSES

    c = collections.Counter(int(label) for label in labels)
    return {str(k): c.get(k, 0) for k in range(NUM_CLASSES)}


def experiment_splits(root: Path, experiment: str) -> dict:
    """An experiment's three splits, as ``python train.py experiment=<experiment>`` makes them."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from data.splits import load_splits

    with initialize_config_dir(config_dir=str(root / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={experiment}"])
    return load_splits(OmegaConf.to_container(cfg.dataset, resolve=True), progress=False)


def long_train_splits(root: Path) -> dict:
    """``experiment=long_train``'s three splits, as ``python train.py experiment=long_train`` makes them."""
    return experiment_splits(root, "long_train")


def _check(name: str, made: dict, recorded: dict, source: str) -> str:
    """One line saying what was checked; a SystemExit naming both when the set is not the one scored."""
    if made != recorded:
        raise SystemExit(f"error: {name} made again has {made}, {source} recorded {recorded}: not the set scored")
    return f"{source}: {', '.join(f'{k} {v}' for k, v in sorted(recorded.items()))}"


def long_train_sets(root: Path) -> list[dict]:
    splits = long_train_splits(root)
    records = [json.loads(line) for line in (root / LONG_TRAIN_RECORDS).read_text().splitlines() if line.strip()]
    test = splits["test"]
    roots = dict(collections.Counter(test["group"]))
    lengths = dict(collections.Counter(length_bucket(n) for n in test["length"]))
    if not records or not all(r.get("test_by_root") and r.get("test_by_length") for r in records):
        raise ValueError(
            f"{LONG_TRAIN_RECORDS}: no records with test_by_root and test_by_length to check long_train's test set "
            "against; record its runs first (make experiment E=long_train)"
        )
    checked = None
    for r in records:
        checked = _check("long_train test", roots, {k: v["n"] for k, v in r["test_by_root"].items()}, "test_by_root")
        checked += "; " + _check(
            "long_train test", lengths, {k: v["n"] for k, v in r["test_by_length"].items()}, "test_by_length"
        )
    checked = f"{LONG_TRAIN_RECORDS} ({len(records)} records), expressions per {checked}"
    names = {"test": "long_train test", "val": "long_train validation", "train": "long_train training"}
    return [
        {
            "set": names[split],
            "made_by": f"experiment=long_train's {split} split",
            "labels": counts(splits[split]["label"]),
            "checked": checked if split == "test" else "made with the test split (one pool, cut in three)",
        }
        for split in ("test", "val", "train")
    ]


def lra_sets(root: Path) -> list[dict]:
    from data import listops

    scored = json.loads((root / LENGTHS).read_text())["runs"]
    out = []
    for name, lo, hi, seed in SETS:
        if lo <= 100:
            continue  # short: not a long set
        rows = listops.sample_unseen(NUM, seed, set(), min_length=lo, max_length=hi, **LRA)  # make_sets' call
        lengths = dict(collections.Counter(length_bucket(len(r["tokens"])) for r in rows))
        recorded = {k: v["n"] for k, v in scored[0]["sets"][name]["by_length"].items()}
        checked = _check(name, lengths, recorded, "by_length")
        out.append(
            {
                "set": name,
                "made_by": f"studies.long_range's {name} set (generator seed {seed}, {NUM} expressions)",
                "labels": counts(r["label"] for r in rows),
                "checked": f"{LENGTHS} (its first run), expressions per {checked}",
            }
        )
    return out


def essay_sets(root: Path) -> list[dict]:
    """The full-scale essay suite's test split, checked example by example (its fingerprint) against the
    records that kept their test predictions."""
    from data.graph_dataset import split_fingerprint
    from data.splits import column

    path = root / ESSAY_RECORDS
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    prints = {r["test_predictions"]["fingerprint"] for r in records if r.get("test_predictions")}
    if not prints:
        raise ValueError(
            f"{ESSAY_RECORDS}: no records with test predictions to check the essay suite's test set against; "
            f"record its runs first (make experiment E={ESSAY_EXPERIMENT})"
        )
    if len(prints) > 1:
        raise ValueError(f"{ESSAY_RECORDS}: its records scored {len(prints)} different test sets: {sorted(prints)}")
    test = experiment_splits(root, ESSAY_EXPERIMENT)["test"]
    made = split_fingerprint(column(test, "tokens"), column(test, "label"))
    (recorded,) = prints
    checked = _check("the essay suite's test", {"fingerprint": made}, {"fingerprint": recorded}, "test_predictions")
    kept = sum(1 for r in records if r.get("test_predictions"))
    return [
        {
            "set": "essay suite test",
            "made_by": f"scale=full's test split (experiment={ESSAY_EXPERIMENT}; every full-scale essay experiment's)",
            "labels": counts(column(test, "label")),
            "checked": f"{ESSAY_RECORDS} ({kept} records), the split's {checked}",
            "one_label": one_label_runs(root, column(test, "label"), made),
        }
    ]


def one_label_runs(root: Path, labels, fingerprint: str) -> dict:
    """Which runs of ``docs/results/runs/*.jsonl`` scored on this split are right on every example of one label
    and on no other: what always answering that label scores, example by example. A run recorded under several
    experiments' names (``tools.records.identity``) counts once, its experiments joined. ``{"fingerprint": the
    split's, "records": how many records were read, "distinct": how many runs they hold, "runs": [{experiment,
    run, label, test_acc}], "counts": {experiment: runs}}``."""
    from engine.predictions import decode_correct
    from tools.records import identity

    labels = np.asarray([int(label) for label in labels])
    read, seen, found = 0, set(), {}
    for path, record in scored_on(root, fingerprint):
        scored = record["test_predictions"]
        read += 1
        try:
            correct = decode_correct(scored)
        except ValueError as e:
            raise SystemExit(f"error: {path}: {e}") from None
        if len(correct) != len(labels):
            raise SystemExit(
                f"error: {path}: a record holds {len(correct)} test predictions for {len(labels)} examples: "
                "gather it again (tools.records) from its run's results.json"
            )
        run = identity(record)
        if run in found:  # the same run under another experiment's name: listed once
            found[run]["experiment"] += f", {path.stem}"
            continue
        seen.add(run)
        for label in np.unique(labels):
            if np.array_equal(correct, labels == label):
                overrides = [o for o in record.get("overrides", []) if not o.startswith("experiment=")]
                found[run] = {
                    "experiment": path.stem,
                    "run": " ".join(overrides),
                    "label": int(label),
                    "test_acc": record.get("test_acc"),
                }
    runs = list(found.values())
    return {
        "fingerprint": fingerprint,
        "read": digest(root, fingerprint),
        "records": read,
        "distinct": len(seen),
        "runs": runs,
        "counts": dict(collections.Counter(r["experiment"] for r in runs)),
    }


def main(argv: list[str] | None = None) -> int:
    from engine.io import write_json, write_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON to write (its table beside it, .md)")
    args = parser.parse_args(argv)
    try:
        sets = long_train_sets(ROOT) + lra_sets(ROOT) + essay_sets(ROOT)
    except (ValueError, FileNotFoundError) as e:  # nothing is written
        raise SystemExit(f"error: {e}") from None
    data = {
        "command": COMMAND + "".join(f" {a}" for a in (sys.argv[1:] if argv is None else argv)),
        "sets": sets,
    }
    out = args.out if args.out.is_absolute() else ROOT / args.out
    write_json(out, data)
    write_text(out.with_suffix(".md"), chance_markdown(data))
    print(chance_markdown(data))
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
