"""Length generalisation: score ListOps models trained on short expressions on longer and longer ones.

    python -m studies.long_range multirun/long_range --out docs/results/long_range_lengths.md \\
        --plot docs/figures/long_range_lengths.png            # make experiment E=long_range runs this last
    python -m studies.long_range RUN_DIR [RUN_DIR ...] --num 200    # any runs with checkpoints/best.pt

Every run (a directory holding ``checkpoints/best.pt`` and ``results.json``; directories are searched
recursively) is scored on four test sets:

  own test 1-100    the run's own test split (for dataset=listops_full, Nangia & Bowman's recipe:
                    depth <= 20, 2-5 arguments), read from its results.json;
  LRA 1-100, LRA 101-500, LRA 501-1,999
                    fresh expressions of the Long Range Arena recipe (Tay et al., 2021: max depth 10,
                    2-10 arguments) in three length ranges; 501-1,999 is LRA's own range.

The LRA sets are generated once (``--num`` each, fixed seeds the training data never used) and kept
as LRA-layout TSV files under ``--data-dir``, so ``evaluate.py data_file=...`` can score them too.
The short LRA set leaves out every expression of ``dataset=listops_full``'s pool, and each run is
scored only on those of its expressions that are not in its own training split, so no test
expression was seen in training. Going from the published recipe to LRA 1-100 changes the
arity (up to 10 arguments, never seen in training) but not the length; the next two sets change
the length. A model that computes ListOps compositionally should hold its accuracy across all four.

Long expressions are batched by a token budget, and their graphs built batch by batch (the complete
graph of a 2,000-token expression has 4M edges). Complete graphs run on the dense path (the same
function as message passing: tests/models/test_dense.py), which needs no edge list on the device. Scores
are saved in each run's ``long_range.json`` and reused (``--force`` scores again). Fewer runs than the JSON
beside ``--out`` holds (a checkout without some run directories) stop the command before anything is scored
or written (``engine.io.keep_committed``): ``python -m tools.check_docs --render`` draws the table again.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import statistics
import sys
import time
from pathlib import Path

import datasets
import torch
from torch.utils.data import DataLoader

from data import listops
from data.batches import collate
from data.graph_dataset import GraphDataset
from data.listops import describe_example
from data.splits import load_splits
from engine.checkpoint import load_checkpoint, load_model
from engine.evaluation import LENGTH_BUCKETS, predict, summarize
from engine.io import keep_committed, write_json, write_text
from engine.memory import nodes_per_graph
from engine.placement import Placement
from tools import seals
from tools.common import pyplot
from tools.replay import Table
from tools.verdicts import length_row as label  # a run's row: tools.verdicts reads the rows too

LRA = {"max_depth": 10, "max_args": 10, "sampler": "budget"}  # the Long Range Arena recipe
# (name, min_length, max_length, generator seed): seeds the training data (seed 0) never used
SETS = (("LRA 1-100", 1, 100, 1001), ("LRA 101-500", 101, 500, 1002), ("LRA 501-1999", 501, 1999, 1003))
PUBLISHED = "own test 1-100"
SHORT = {name: lo <= 100 for name, lo, _, _ in SETS}
ROOT = Path(__file__).resolve().parents[2]
REPLAYED = "docs/results/long_range_lengths.md"  # the committed table: REPLAYS below draws it again
CHANCE = "docs/results/long_range_chance.md"  # the most frequent answer of each ListOps test set (chance.py)
CHANCE_JSON = Path(CHANCE).with_suffix(".json")  # what chance.py writes, and its table is drawn from
CHANCE_COMMAND = "python -m studies.long_range.chance"
RUNS = Path(
    "docs/results/runs"
)  # every experiment's records (chance.one_label_runs reads those scored on the essay split)
TRAIN_POOL = 101_000  # dataset=listops_full: 90k + 1k + 10k expressions of seed 0


def make_sets(num: int, data_dir: Path, exclude: int = TRAIN_POOL) -> dict[str, Path]:
    """The LRA test files, generated once: ``{name: path}``. The short set leaves out the first ``exclude``
    expressions of the training pool (seed 0, <= 100 tokens)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, lo, hi, seed in SETS:
        short = lo <= 100  # short expressions may repeat training ones: leave those out
        path = data_dir / f"lra_{lo}-{hi}_seed{seed}_n{num}{f'_x{exclude}' if short else ''}.tsv"
        if not path.is_file():
            start = time.perf_counter()
            seen = {tuple(e["tokens"]) for e in listops.generate(exclude if short else 0, seed=0, max_length=100)}
            rows = listops.sample_unseen(num, seed, seen, min_length=lo, max_length=hi, **LRA)
            listops.write_tsv(rows, path, layout="lra")
            print(f"wrote {len(rows)} expressions of {lo}-{hi} tokens to {path} ({time.perf_counter() - start:.0f} s)")
        out[name] = path
    return out


def token_batches(lengths: list[int], tokens: int, pairs: int) -> list[list[int]]:
    """Indices sorted by length, cut into batches of at most ``tokens`` padded tokens and ``pairs``
    padded token pairs (what a dense complete graph holds), at least one example each."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches, cur = [], []
    for i in order:
        n = lengths[i]
        if cur and ((len(cur) + 1) * n > tokens or (len(cur) + 1) * n * n > pairs):
            batches.append(cur)
            cur = []
        cur.append(i)
    return batches + ([cur] if cur else [])


@functools.cache
def _training_expressions(dataset_json: str) -> frozenset:
    train = load_splits(json.loads(dataset_json), progress=False)["train"]["tokens"]
    return frozenset(tuple(t) for t in train)


def training_expressions(dataset_cfg: dict) -> frozenset:
    """The token tuples of a run's training split (made again from its config)."""
    return _training_expressions(json.dumps(dataset_cfg, sort_keys=True))


def score(run_dir: Path, sets: dict[str, Path], tokens: int, pairs: int, device: str = "auto") -> dict:
    """A run's accuracy on each test set, overall and by length, with the time each took."""
    ckpt = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    model, vocab, construction, config = load_model(ckpt, str(run_dir))
    data_construction = construction
    if construction.name == "complete" and hasattr(model, "impl"):
        model.impl = "dense"  # the same function, and it reads no edge list: the batches are built without one
        data_construction = dataclasses.replace(construction, name="none")
    devices = Placement.decide(device, model.impl).devices  # the model's device, the graphs'
    model.to(devices[0])
    results = json.loads((run_dir / "results.json").read_text())
    out = {
        "model": config["model"]["name"],
        "cell": config["model"].get("cell"),
        "graph": config["graph"]["name"],
        "seed": config.get("seed"),
        "train_args": config["dataset"].get("max_args"),  # the arity it was trained on
        "sets": {
            PUBLISHED: {
                "accuracy": results["test_acc"],
                "num_examples": results["num_examples"]["test"],
                "by_length": results.get("test_by_length", {}),
            }
        },
    }
    for name, path in sets.items():
        start = time.perf_counter()
        rows = listops.read_tsv(path)
        if SHORT[name]:  # leave out what this run trained on
            seen = training_expressions(config["dataset"])
            rows = [r for r in rows if tuple(r["tokens"]) not in seen]
        if not rows:
            print(f"  {name}: every expression was in the training split; not scored")
            continue
        data = GraphDataset(datasets.Dataset.from_list(rows).map(describe_example), vocab, data_construction, lazy=True)
        nodes = [nodes_per_graph(construction, n) for n in data.sizes]  # bpt, binary_tree: ~2n nodes
        batches = token_batches(nodes, tokens, pairs)
        loader = DataLoader(data, batch_sampler=batches, collate_fn=collate)
        preds, labels, _ = predict(model, loader, *devices)
        order = [i for b in batches for i in b]  # predictions come in batch order
        back = torch.empty_like(preds)
        back[torch.tensor(order)] = preds
        summary = summarize(back, data.labels, data.meta, listops.NUM_CLASSES)
        out["sets"][name] = {
            "accuracy": summary["accuracy"],
            "num_examples": summary["num_examples"],
            "by_length": summary["by_length"],
            "by_depth": summary["by_depth"],
            "seconds": round(time.perf_counter() - start, 1),
        }
        print(f"  {name}: {summary['accuracy']:.3f} ({out['sets'][name]['seconds']:.0f} s)", flush=True)
    return out


def mean_std(values: list[float]) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f} (n={len(values)})"


def grouped(scores: list[dict]) -> dict[str, list[dict]]:
    """Runs that differ only in their seed, together, in order of first appearance."""
    groups: dict[str, list[dict]] = {}
    for r in scores:
        groups.setdefault(label(r), []).append(r)
    return groups


def table(scores: list[dict]) -> str:
    names = [PUBLISHED] + [s[0] for s in SETS]
    groups = grouped(scores)
    lines = ["| model / graph | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, rs in groups.items():
        cells = [mean_std([r["sets"][n]["accuracy"] for r in rs if n in r["sets"]]) for n in names]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")

    def count(name: str) -> str:
        ns = sorted({r["sets"][name]["num_examples"] for r in scores if name in r["sets"]}) or [0]
        return str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"

    sizes = " · ".join(f"{n}: {count(n)}" for n in names)
    lines.append(f"\nTest expressions per set: {sizes}.")
    return "\n".join(lines)


def slim(r: dict) -> dict:
    """What the table and the plot read of a run's scores (its ``long_range.json`` less the cache key and the
    breakdown by depth): a few kB a run, committed beside the table."""
    keep = ("model", "cell", "graph", "seed", "train_args")
    sets = {name: {k: v for k, v in s.items() if k != "by_depth"} for name, s in r["sets"].items()}
    return {**{k: r.get(k) for k in keep}, "sets": sets}


def markdown(data: dict) -> str:
    """The committed table (``--out``), from the JSON written beside it (``tools.check_docs`` replays it)."""
    return (
        "# Length generalisation on ListOps\n\n"
        f"`{data['command']}` ({len(data['runs'])} runs; scoring took {data['scoring_seconds']:.0f} s in all, "
        f"this call {data['wall_seconds']:.0f} s).\n\n"
        "**Test accuracy** (trained on the published recipe, <= 100 tokens; uniform guessing scores 0.1, the most "
        "frequent answer 0.16-0.18 of a long set: [long_range_chance.md](long_range_chance.md))\n\n"
        + table(data["runs"])
        + "\n"
    )


def by_length(r: dict) -> dict[str, tuple[int, float]]:
    """Accuracy by length bucket over the LRA sets (every expression of the LRA recipe)."""
    pooled: dict[str, list[tuple[int, float]]] = {}
    for name, *_ in SETS:
        for bucket, v in r["sets"].get(name, {"by_length": {}})["by_length"].items():
            pooled.setdefault(bucket, []).append((v["n"], v["acc"]))
    return {b: (sum(n for n, _ in vs), sum(n * a for n, a in vs) / sum(n for n, _ in vs)) for b, vs in pooled.items()}


def plot(scores: list[dict], path: Path) -> None:
    plt = pyplot()
    groups = grouped(scores)
    edges = (0,) + LENGTH_BUCKETS
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for key, rs in groups.items():
        curves = [by_length(r) for r in rs]
        xs, ys = [], []
        for lo, hi in zip(edges[:-1], edges[1:]):
            b = f"{lo + 1}-{hi}"
            accs = [c[b][1] for c in curves if b in c and c[b][0] >= 10]
            if accs:
                xs.append(math.sqrt((lo + 1) * hi))
                ys.append(statistics.mean(accs))
        ax.plot(xs, ys, marker="o", label=key)
    ax.axvline(100, color="grey", ls=":", lw=1)
    ax.text(100, 0.02, " longest training expression", color="grey", fontsize=8)
    ax.axhline(0.1, color="grey", ls="--", lw=1)
    ax.set_xlim(10, edges[-1])  # fixed, so a tiny run whose buckets are all too small still draws an axis
    ax.set_xscale("log")
    ax.set(xlabel="expression length (tokens, log scale)", ylabel="test accuracy", ylim=(0, 1.02))
    ax.set_title("Trained on <= 100 tokens, tested on the LRA recipe up to 1,999")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cache_key(run: Path, args) -> dict:
    """What a run's saved scores depend on: its checkpoint (trained again, it is scored again) and the sets."""
    best = run / "checkpoints" / "best.pt"
    return {"checkpoint_mtime": best.stat().st_mtime, "num": args.num, "exclude_pool": args.exclude_pool}


def find_runs(roots: list[Path]) -> list[Path]:
    runs = []
    for root in roots:
        runs += sorted(
            p.parent.parent for p in root.rglob("checkpoints/best.pt") if (p.parent.parent / "results.json").is_file()
        )
    return runs


def majority(labels: dict[str, int]) -> tuple[str, float]:
    """The most frequent label (the smallest on a tie) and its share of the set."""
    top = max(labels, key=lambda k: (labels[k], -int(k)))
    return top, labels[top] / sum(labels.values())


def chance_markdown(data: dict) -> str:
    """``chance.py``'s table (``CHANCE``), from the JSON it writes beside it (check_docs replays it)."""
    lines = [
        "# The most frequent answer on the ListOps test sets",
        "",
        f"`{data['command']}` writes this table from `{Path(CHANCE).with_suffix('.json')}`. Each set is made "
        "again by the code that made it for the runs, and checked against the expressions per root operator or per length that their "
        "records kept (last column). Always answering a set's most frequent label scores that label's share "
        "of it: the accuracy to beat before a model is said to have learned more than the label counts "
        "(uniform guessing scores 0.1).",
        "",
        "| set | expressions | most frequent answer | its share | expressions per label 0-9 | made by | checked against |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in data["sets"]:
        top, share = majority(s["labels"])
        per_label = " · ".join(str(v) for v in s["labels"].values())
        lines.append(
            f"| {s['set']} | {sum(s['labels'].values())} | {top} | {share:.3f} | {per_label} | {s['made_by']} "
            f"| {s['checked']} |"
        )
    for s in data["sets"]:
        if "one_label" in s:
            lines += one_label_markdown(s["set"], s["one_label"])
    return "\n".join(lines) + "\n"


def one_label_markdown(name: str, found: dict) -> list[str]:
    """The runs right on every expression of one label and on no other (``chance.one_label_runs``)."""
    lines = [
        "",
        f"## Runs that answer one label on the {name} set",
        "",
        f"Of the {found.get('distinct', found['records'])} recorded runs scored on the {name} set (their test "
        f"predictions' fingerprint; {found['records']} records, a run shared by several experiments counts once), "
        f"{len(found['runs'])} are right on every expression of one label and on no other, as a model that always "
        "answers that label is.",
    ]
    if found["runs"]:
        lines += ["", "| experiment | run | label | test accuracy |", "|---|---|---|---|"]
        lines += [f"| {r['experiment']} | {r['run']} | {r['label']} | {r['test_acc']:.4f} |" for r in found["runs"]]
    return lines


def scored_on(root: Path, fingerprint: str):
    """Each record of ``docs/results/runs/*.jsonl`` whose test predictions were scored on the split with this
    fingerprint, as (its file, the record)."""
    for path in sorted((root / RUNS).glob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                record = json.loads(line) if line.strip() else {}
            except json.JSONDecodeError as e:
                raise ValueError(
                    f"{path}:{number}: not a JSON record ({e.msg}): gather it again (tools.records)"
                ) from None
            scored = record.get("test_predictions")
            if scored and scored.get("fingerprint") == fingerprint:
                yield path, record


def digest(root: Path, fingerprint: str) -> str:
    """A fingerprint of what ``chance.one_label_runs`` reads on this split: every record's file, run and predictions. A
    record gathered, replaced or removed since changes it."""
    import hashlib

    from tools.records import identity

    lines = sorted(
        f"{path.stem} {identity(record)} {record['test_predictions'].get('correct')}"
        for path, record in scored_on(root, fingerprint)
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def chance_is_current(root: Path) -> list[str]:
    """One line for each set of the committed ``long_range_chance.json`` whose one-label runs were read from other
    records than ``docs/results/runs/`` now holds on its split (gathered, replaced or removed since)."""
    path = root / CHANCE_JSON
    if not path.exists():
        return []
    problems = []
    for made in json.loads(path.read_text())["sets"]:
        block = made.get("one_label")
        if not block:
            continue
        if "fingerprint" not in block or "read" not in block:
            problems.append(
                f"{CHANCE_JSON}: {made['set']}'s one-label runs do not say what they read: rerun {CHANCE_COMMAND}"
            )
            continue
        if digest(root, block["fingerprint"]) != block["read"]:
            now = sum(1 for _ in scored_on(root, block["fingerprint"]))
            problems.append(
                f"{CHANCE_JSON}: {made['set']}'s one-label runs were read from other records than the {now} {RUNS} "
                f"now holds on that split (gathered, replaced or removed since; {block['records']} read): rerun "
                f"{CHANCE_COMMAND}"
            )
    return problems


CHECKS = [chance_is_current]  # tools.check_docs runs these beside the tables below (one line per problem)

# the tables tools.check_docs replays: from the JSON that --out writes beside each
REPLAYS = [
    Table(
        REPLAYED,
        ("docs/results/long_range_lengths.json",),
        markdown,
        "studies.long_range.markdown",
    ),
    Table(
        CHANCE,
        (str(Path(CHANCE).with_suffix(".json")),),
        chance_markdown,
        "studies.long_range.chance.markdown",
    ),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories, or directories holding them")
    parser.add_argument("--out", type=Path, help="markdown table to write")
    parser.add_argument("--plot", type=Path, help="accuracy by length, PNG")
    parser.add_argument("--num", type=int, default=1000, help="expressions per LRA test set")
    parser.add_argument("--data-dir", type=Path, default=Path(".cache/tagnn/long_range"))
    parser.add_argument("--exclude-pool", type=int, default=TRAIN_POOL, help="training pool left out of LRA 1-100")
    parser.add_argument("--tokens", type=int, default=16384, help="padded tokens per evaluation batch")
    parser.add_argument("--pairs", type=int, default=2**25, help="padded token pairs per batch (dense complete)")
    parser.add_argument("--force", action="store_true", help="score runs that already have long_range.json")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    runs = find_runs(args.runs)
    if args.out:  # a checkout without the run directories: no table of fewer runs over the committed one
        keep_committed(
            args.out.with_suffix(".json"),
            len(runs),
            ", ".join(map(str, args.runs)),
            f"its table stays; python -m tools.check_docs --render {args.out} draws it again from that JSON "
            "(or train the missing runs: make experiment E=long_range ARGS=--missing)",
        )
    if not runs:
        print(f"error: no run with checkpoints/best.pt and results.json under {', '.join(map(str, args.runs))}")
        return 2
    sets = make_sets(args.num, args.data_dir, args.exclude_pool)
    scores = []
    for run in runs:
        cached = run / "long_range.json"
        if cached.is_file() and not args.force:
            r = json.loads(cached.read_text())
            if r.get("key") == cache_key(run, args) and all(name in r["sets"] for name, *_ in SETS):
                scores.append(r)
                continue
        print(f"scoring {run}", flush=True)
        r = {**score(run, sets, args.tokens, args.pairs, args.device), "key": cache_key(run, args)}
        write_json(cached, r)
        scores.append(r)
    print(table(scores))
    if args.out:
        data = {
            "command": "python -m studies.long_range " + " ".join(sys.argv[1:] if argv is None else argv),
            "scoring_seconds": round(sum(s.get("seconds", 0) for r in scores for s in r["sets"].values()), 1),
            "wall_seconds": round(time.perf_counter() - start, 1),
            "runs": [slim(r) for r in scores],
        }
        write_json(args.out.with_suffix(".json"), data)  # committed: check_docs draws the table again from it
        write_text(args.out, markdown(data))
        print(f"wrote {args.out} and {args.out.with_suffix('.json')}")
        if str(args.out.resolve()) == str(ROOT / REPLAYED) and seals.unseal(ROOT, REPLAYED):
            print(f"{REPLAYED}: seal dropped from {seals.SEALED} (check_docs replays it from its JSON now)")
    if args.plot:  # with --out, from the committed JSON's runs, as the table is
        plot(data["runs"] if args.out else scores, args.plot)
        print(f"wrote {args.plot}")
    return 0
