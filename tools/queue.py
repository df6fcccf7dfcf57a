"""Train several experiments' missing runs one after another, one run a part, so a long campaign survives being
stopped: ``python -m tools.queue graph_choice_depth training --shard 1/2``.

Each part is ``python -m tools.experiment E --missing --max-runs 1 --no-then [--shard K/N]``: it trains the next
run of the plan that has no committed record (``docs/results/runs/E.jsonl``), writes that run's record and draws
the table again. The queue goes on with E until its shard has no run left, then takes the next experiment. Killed
at any moment, it loses at most the run in progress, and that run goes on from its last epoch the next time
(``trainer.resume=auto``).

Two queues side by side on 2 cores, one thread a run, each in its own checkout with the data cache shared
(``TAGNN_CACHE_DIR``), share the work without training a run twice:

    OMP_NUM_THREADS=1 TAGNN_CACHE_DIR=/tmp/tagnn-cache nohup python -m tools.queue training --shard 1/2 &   # checkout A
    OMP_NUM_THREADS=1 TAGNN_CACHE_DIR=/tmp/tagnn-cache nohup python -m tools.queue training --shard 2/2 &   # checkout B

then gather each checkout's runs here: ``python -m tools.records A/multirun/training training --at COMMIT``.
``--redo-unpredicted`` also trains again the runs whose record holds no per-example test predictions (records
written before they were kept), so that the paired rule of ``tools.stats`` can judge them.

Before it trains an experiment, the queue copies into its records every run of its plan that another experiment
has already recorded, with predictions, under another name (``tools.share``: the same config, seed for seed);
``--no-share`` trains them all.

``--only E:KEY=V1,V2`` (repeatable) trains only E's runs that set KEY to one of the values, so that the runs one
comparison needs come first (``tools.experiment --only``; the shards split the selected runs):

    python -m tools.queue heads aggregation --only heads:model.num_heads=1 --only aggregation:graph=tree --shard 1/2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from tools import experiment, records, share


def left_of(
    name: str, shard: tuple[int, int], redo_unpredicted: bool = False, only: list[tuple[str, tuple[str, ...]]] = ()
) -> list[list[str]]:
    """The runs of ``name``'s plan (those ``only`` selects, ``tools.experiment --only``) in shard ``(K, N)`` still to
    train: no committed record, or (``redo_unpredicted``) a record without test predictions."""
    return experiment.to_train(name, [], shard, only, missing_only=True, redo_unpredicted=redo_unpredicted)


def only_of(text: str) -> tuple[str, tuple[str, tuple[str, ...]]]:
    """``--only E:KEY=V1,V2`` -> ``(E, (KEY, (V1, V2)))``: a selection of ``tools.experiment --only`` for E."""
    name, colon, rest = text.partition(":")
    if not colon or not name:
        raise argparse.ArgumentTypeError(f"{text!r} names no experiment; write e.g. --only aggregation:graph=tree")
    return name, experiment.only_of(rest)


def copy_shared(name: str) -> None:
    """``tools.share``: into ``name``'s records, its runs that other experiments recorded with predictions; its table
    drawn again when any came. A failure here is said in one line and the queue trains every run instead."""
    try:
        copied = share.fill(name, share.recorded())
    except Exception as e:  # a bad line in some experiment's records must not stop a night's campaign
        print(f"[queue] {name}: tools.share failed ({type(e).__name__}: {e}); training every run", flush=True)
        return
    for r in copied:
        print(f"[queue] {name}: {' '.join(records.key_of(r['overrides']))} <- {r['shared_from']} (tools.share)")
    if copied:
        share.redraw(name)


def status(names: list[str]) -> list[str]:
    """One line an experiment: its planned runs, how many are recorded, how many of those kept predictions, and
    how many are copies (``tools.share``); nothing is trained or written."""
    lines = []
    for name in names:
        plan = {tuple(records.key_of(run)) for run in experiment.planned(name, [])}
        mine = [r for r in records.read(name) if tuple(r["overrides"]) in plan]
        predicted = sum(bool(r.get("test_predictions")) for r in mine)
        copies = sum(bool(r.get("shared_from")) for r in mine)
        lines.append(
            f"{name}: {len(mine)} of {len(plan)} runs recorded, {predicted} with predictions"
            + (f", {copies} copied from other experiments" if copies else "")
            + f"; {len(plan) - len(mine)} to train, {len(mine) - predicted} more with --redo-unpredicted"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="+", help="experiments of conf/experiment/, in the order to train them")
    parser.add_argument("--shard", type=experiment.shard_of, default=(1, 1), metavar="K/N")
    parser.add_argument("--redo-unpredicted", action="store_true", help="retrain runs recorded without predictions")
    parser.add_argument(
        "--no-share",
        action="store_true",
        help="train every run, even one another experiment has recorded (tools.share)",
    )
    parser.add_argument(
        "--only",
        type=only_of,
        action="append",
        default=[],
        metavar="E:KEY=V1,V2",
        help="train only E's runs that set KEY to one of the values (repeatable; tools.experiment --only)",
    )
    parser.add_argument("--status", action="store_true", help="say how far each experiment is; train nothing")
    args = parser.parse_args(argv)
    for name in args.names:
        experiment.read(name)  # an unknown name stops here, before anything trains
    only = {name: [sel for e, sel in args.only if e == name] for name in args.names}
    for e, (key, _) in args.only:
        if e not in only:
            parser.error(f"--only {e}:{key}=...: {e} is not among the experiments to train ({', '.join(args.names)})")
    for name in args.names:  # a selection that matches nothing stops here, before anything trains
        experiment.select(name, experiment.planned(name, []), only[name])
    if args.status:
        print("\n".join(status(args.names)))
        return 0
    shard = "/".join(map(str, args.shard))
    for name in args.names:
        if not args.no_share:  # the very same run recorded under another experiment's name is copied, not trained
            copy_shared(name)
        while todo := left_of(name, args.shard, args.redo_unpredicted, only[name]):
            label = " ".join(o for o in records.key_of(todo[0]) if not o.startswith("experiment="))
            print(f"[queue] {time.strftime('%H:%M:%S')} {name}: {len(todo)} left in shard {shard}; next {label}")
            cmd = [sys.executable, "-m", "tools.experiment", name, "--missing", "--max-runs", "1", "--no-then"]
            cmd += ["--shard", shard] if args.shard != (1, 1) else []
            if args.redo_unpredicted:
                cmd.append("--redo-unpredicted")
            cmd += [f"--only={key}={','.join(values)}" for key, values in only[name]]
            if subprocess.call(cmd, cwd=experiment.ROOT):
                print(f"[queue] {name}: a part failed; going on with the next experiment", flush=True)
                break
            if left_of(name, args.shard, args.redo_unpredicted, only[name]) == todo:  # no record came: no loop
                print(f"[queue] {name}: the part recorded nothing; going on with the next experiment", flush=True)
                break
        print(f"[queue] {time.strftime('%H:%M:%S')} {name}: shard {shard} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
