"""Run one experiment of ``conf/experiment/`` and write its table: ``make experiment E=sst``.

    python -m tools.experiment sst                   # every grid of conf/experiment/sst.yaml, then the table
    python -m tools.experiment sst --table-only      # the table again, from the runs already there
    python -m tools.experiment trec seed=0           # extra overrides go to every grid

Most experiments are one Hydra grid (``hydra.sweeper.params`` or overrides on the command line). An
experiment whose cells are not a full product (a Tree-LSTM runs on trees, not on complete graphs)
lists its grids under ``experiment_grids``, each a line of multirun overrides; they run one after the
other into the experiment's sweep directory, and one table is made of them all:

    experiment_grids:
      - model=transformer,gat,gcn graph=complete,tree,dep seed=0,1,2
      - model=treelstm graph=tree,dep seed=0,1,2

Every run's slim record goes into ``docs/results/runs/E.jsonl`` (``tools.records``: a rerun replaces its own
lines only), and the table is ``python -m tools.results_table docs/results/runs/E.jsonl`` into
``docs/results/E.md`` with its plots, drawn from those committed records (``--table-only`` without
``multirun/E`` draws them again from the records alone; ``tools.check_docs`` replays the table).
``experiment_then: <module> <args>`` runs one more analysis of the runs after it
(``long_range.yaml``: ``studies.long_range``, which scores every run on longer expressions); a list of
such lines runs each in order (``neural_syntax.yaml``: the attention analysis of each seed).
``experiment_table: <path stem>`` sends the runs' table and plots elsewhere (``listops_best.yaml``: to its
sweep directory), for an experiment whose committed table an ``experiment_then`` tool writes.

The essay experiments (``studies/essay``) select ``scale=full``; ``scale=small`` among the overrides
runs the same grids smaller into ``multirun/small/E`` and ``docs/results/small/E.md`` (``{suite_dir}``
in ``experiment_then`` is that ``small/`` prefix). An experiment that leaves ``trainer.resume`` out of
its run directories' names runs with ``trainer.resume=auto``: finished runs are tested again, not
retrained, and a killed grid goes on from each run's last epoch.

A grid too long for one sitting goes in parts, on as many machines as it takes, because the committed
records, not ``multirun/``, say what is done:

    python -m tools.experiment heads --missing --max-runs 4 --jobs 2   # 4 runs with no record yet, 2 at a time

``--missing`` trains only the runs of the plan (every grid's runs as Hydra's sweeper names them, ``planned``)
that have no line in ``docs/results/runs/E.jsonl``; ``--max-runs`` caps the part; ``--jobs`` trains runs side by
side (each with ``OMP_NUM_THREADS`` = cores / jobs, its output in ``multirun/E/.logs/``); ``--shard K/N``
keeps the Kth of every N runs of the plan (by place in the plan, before ``--missing`` and ``--max-runs``, so a
shard is the same runs in every part): N checkouts or machines split the grid and no run is trained twice.
``--only KEY=V1,V2`` (repeatable) keeps the runs of the plan that set KEY to one of those values, before the
shards are cut, so that the runs one comparison needs train first and the shards share them evenly:

    python -m tools.experiment aggregation --missing --only graph=tree --only model=sum,mean,max --shard 1/2

A part
writes its runs' records when it ends; the runs of another checkout join them with
``python -m tools.records OTHER/multirun/E E`` (stamped with that checkout's commit), and ``--table-only`` then
draws the table. A sealed table (``tools.seals``) stays sealed, its rows held, until the records hold every
planned run; then the table is drawn and the seal dropped. ``experiment_then`` reads run directories: a part skips
it unless every run's is on this machine, and ``--table-only`` skips it when none is (a fresh clone).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tools import headline, records, seals

ROOT = Path(__file__).resolve().parents[1]


def read(name: str) -> dict:
    """``conf/experiment/<name>.yaml`` as a dict."""
    path = ROOT / "conf" / "experiment" / f"{name}.yaml"
    if not path.is_file():
        valid = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
        raise SystemExit(f"error: no experiment {name!r}; valid: {', '.join(valid)}")
    return yaml.safe_load(path.read_text()) or {}


def grids_of(name: str) -> list[list[str]]:
    """The multirun override lists of ``conf/experiment/<name>.yaml`` (one empty list: its own sweep)."""
    grids = read(name).get("experiment_grids") or [""]
    if not isinstance(grids, list) or not all(isinstance(g, str) for g in grids):
        raise SystemExit(f"error: conf/experiment/{name}.yaml: experiment_grids must be a list of override lines")
    return [shlex.split(g) for g in grids]


def thens_of(name: str) -> list[str]:
    """The analyses ``experiment_then`` names: one ``module args`` line or a list of them, run in order."""
    then = read(name).get("experiment_then") or []
    thens = [then] if isinstance(then, str) else then
    if not isinstance(thens, list) or not all(isinstance(t, str) for t in thens):
        raise SystemExit(f"error: conf/experiment/{name}.yaml: experiment_then must be a line or a list of lines")
    return thens


def suite_dir(overrides: list[str]) -> str:
    """``small/`` when the overrides select ``scale=small``, else ``""``."""
    scales = [o.partition("=")[2] for o in overrides if o.startswith("scale=")]
    return f"{scales[-1]}/" if scales and scales[-1] != "full" else ""


def resumes(name: str) -> bool:
    """Does the experiment keep ``trainer.resume`` out of its run directories' names?"""
    hydra = read(name).get("hydra") or {}
    keys = ((hydra.get("job") or {}).get("config") or {}).get("override_dirname", {}).get("exclude_keys", [])
    return "trainer.resume" in keys


def sweep_params(name: str) -> list[str]:
    """The experiment file's own ``hydra.sweeper.params`` as override lines (``key=a,b``)."""
    params = ((read(name).get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    return [f"{k}={v}" for k, v in params.items()]


def planned(name: str, overrides: list[str]) -> list[list[str]]:
    """Every run of the experiment, in the order its grids run them: each run's overrides exactly as Hydra's
    basic sweeper hands them to the job (and so to its ``.hydra/overrides.yaml``, whose ``records.key_of`` is
    the run's record's key). ``overrides`` are the ones added to every grid."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser, extra, runs = OverridesParser.create(), resume_override(name), []
    for grid in grids_of(name):
        lines = [*sweep_params(name), f"experiment={name}", *grid, *extra, *overrides]
        (batch,) = BasicSweeper.split_arguments(parser.parse_overrides(lines), None)
        runs += batch
    return runs


def share(runs: list[list[str]], shard: tuple[int, int]) -> list[list[str]]:
    """The runs of shard ``(K, N)``: the Kth of every N, by place in ``runs`` (the whole plan, so a shard stays the
    same set of runs from part to part, whatever the other shards have recorded meanwhile)."""
    k, n = shard
    return runs[k - 1 :: n]


def only_of(text: str) -> tuple[str, tuple[str, ...]]:
    """``--only KEY=V1,V2`` -> ``(KEY, (V1, V2))``."""
    key, eq, values = text.partition("=")
    picked = tuple(v for v in values.split(",") if v)
    if not eq or not key or not picked:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE[,VALUE]; write e.g. --only graph=tree")
    return key, picked


def select(name: str, runs: list[list[str]], only: list[tuple[str, tuple[str, ...]]]) -> list[list[str]]:
    """The runs that set every ``only`` key to one of its values (all of them when ``only`` is empty; a key given
    twice takes the values of both). A key no run sets, a value no run takes, or keys whose values no run combines
    stop here in one line that names what the plan holds."""
    wanted: dict[str, set[str]] = {}
    for key, values in only:
        wanted.setdefault(key, set()).update(values)
    for key, values in wanted.items():
        held = {o.partition("=")[2] for run in runs for o in run if o.partition("=")[0] == key}
        if not held:
            keys = sorted({o.partition("=")[0] for run in runs for o in run} - {"experiment", "trainer.resume"})
            raise SystemExit(f"error: --only {key}=...: no run of {name} sets {key}; its runs set {', '.join(keys)}")
        if values - held:
            raise SystemExit(
                f"error: --only {key}={','.join(sorted(values - held))}: no run of {name} takes that value; its {key} "
                f"values: {', '.join(sorted(held))}"
            )
    chosen = [run for run in runs if all(any(f"{k}={v}" in run for v in vs) for k, vs in wanted.items())]
    if wanted and not chosen:
        together = " ".join(f"{k}={','.join(sorted(vs))}" for k, vs in wanted.items())
        raise SystemExit(f"error: --only {together}: no run of {name} sets these together")
    return chosen


def shard_of(text: str) -> tuple[int, int]:
    """``--shard K/N`` -> ``(K, N)``, 1 <= K <= N."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not K/N; write e.g. --shard 2/3 (the 2nd of every 3 runs)"
        ) from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--shard {text}: K must be 1 to N, e.g. --shard 1/{max(n, 2)}")
    return k, n


def resume_override(name: str) -> list[str]:
    return ["trainer.resume=auto"] if resumes(name) else []


def missing(name: str, overrides: list[str], have: set[tuple] | None = None) -> list[list[str]]:
    """The planned runs of the experiment without a record among ``have`` (the keys of a records file; default:
    the committed ``docs/results/runs/<name>.jsonl``)."""
    if have is None:
        have = {tuple(r["overrides"]) for r in records.read(f"{suite_dir(overrides)}{name}")}
    return [run for run in planned(name, overrides) if tuple(records.key_of(run)) not in have]


def to_train(
    name: str,
    overrides: list[str],
    shard: tuple[int, int] = (1, 1),
    only: list[tuple[str, tuple[str, ...]]] = (),
    missing_only: bool = False,
    redo_unpredicted: bool = False,
) -> list[list[str]]:
    """The runs a part trains, in plan order: the plan (less what ``only`` leaves out), the shard's share of it (by
    place: the same runs in every part), and with ``missing_only`` only those without a record (``redo_unpredicted``:
    or whose record holds no test predictions). ``tools.queue`` asks the same question before each part."""
    todo = share(select(name, planned(name, overrides), list(only)), shard)
    if not missing_only:
        return todo
    have = None
    if redo_unpredicted:  # a record without predictions counts as missing
        have = {
            tuple(r["overrides"]) for r in records.read(f"{suite_dir(overrides)}{name}") if r.get("test_predictions")
        }
    left = missing(name, overrides, have)
    return [run for run in todo if run in left]


def run_each(name: str, runs: list[list[str]], jobs: int) -> int:
    """Train ``runs`` one Hydra job each (into the sweep directory's usual run directories), ``jobs`` at a
    time; their output goes to ``multirun/<name>/.logs/`` when more than one runs at once. The number that
    failed."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    logs = ROOT / "multirun" / f"{suite_dir(runs[0])}{name}" / ".logs"
    env = dict(os.environ)
    if jobs > 1:
        logs.mkdir(parents=True, exist_ok=True)
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // jobs)))

    def one(k: int, run: list[str]) -> int:
        cmd = [sys.executable, "train.py", "-m", *run]
        label = " ".join(o for o in records.key_of(run) if not o.startswith("experiment="))
        print(f"[run {k}/{len(runs)}] {label}", flush=True)
        start = time.perf_counter()
        if jobs > 1:
            with open(logs / f"run{k}.log", "w") as log:
                rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        else:
            rc = subprocess.call(cmd, cwd=ROOT, env=env)
        where = f" (log: {(logs / f'run{k}.log').relative_to(ROOT)})" if jobs > 1 else ""
        print(
            f"[run {k}/{len(runs)}] {label}: {'failed' if rc else 'done'} in {time.perf_counter() - start:.0f} s"
            f"{where}",
            flush=True,
        )
        return 1 if rc else 0

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return sum(pool.map(one, range(1, len(runs) + 1), runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="an experiment of conf/experiment/")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides added to every grid")
    parser.add_argument("--table-only", action="store_true", help="only rebuild the table from existing runs")
    parser.add_argument(
        "--no-then", action="store_true", help="skip the experiment's analysis (experiment_then, e.g. pruning)"
    )
    parser.add_argument(
        "--missing", action="store_true", help="train only the runs without a committed record (runs/<E>.jsonl)"
    )
    parser.add_argument(
        "--redo-unpredicted",
        action="store_true",
        help="with --missing: also train the runs whose record holds no per-example test predictions",
    )
    parser.add_argument("--max-runs", type=int, default=0, help="train at most this many runs now (0: all)")
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at once (each on cores/jobs threads)")
    parser.add_argument(
        "--shard", type=shard_of, default=(1, 1), metavar="K/N", help="train the Kth of every N runs (N checkouts)"
    )
    parser.add_argument(
        "--only",
        type=only_of,
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="train only the runs that set KEY to one of the values (repeatable; before --shard)",
    )
    args = parser.parse_args(argv)
    if args.max_runs < 0 or args.jobs < 1:
        parser.error("--max-runs must be >= 0 and --jobs >= 1")
    if args.table_only and args.shard != (1, 1):
        parser.error("--shard picks runs to train and --table-only trains none: leave one out")
    grids = grids_of(args.name)
    prefix = suite_dir(args.overrides)
    name = f"{prefix}{args.name}"
    start_all = time.perf_counter()
    at = records.commit()  # the commit the runs run at (HEAD when they start)
    if args.only and args.table_only:
        parser.error("--only picks runs to train and --table-only trains none: leave one out")
    one_by_one = args.missing or args.max_runs or args.jobs > 1 or args.shard != (1, 1) or args.only
    if not args.table_only and not one_by_one:
        for k, grid in enumerate(grids, start=1):
            cmd = [sys.executable, "train.py", "-m", f"experiment={args.name}", *grid]
            cmd += [*resume_override(args.name), *args.overrides]
            print(f"[{k}/{len(grids)}] {shlex.join(cmd[1:])}", flush=True)
            start = time.perf_counter()
            if subprocess.call(cmd, cwd=ROOT):
                print(f"error: grid {k} of experiment {args.name} failed (its runs are under multirun/{name})")
                return 1
            print(f"[{k}/{len(grids)}] done in {time.perf_counter() - start:.0f} s", flush=True)
    elif not args.table_only:
        todo = to_train(args.name, args.overrides, args.shard, args.only, args.missing, args.redo_unpredicted)
        todo = todo[: args.max_runs] if args.max_runs else todo
        print(f"experiment {name}: {len(todo)} run(s) to train, {args.jobs} at a time", flush=True)
        failed = run_each(args.name, todo, args.jobs) if todo else 0
        if failed:
            print(f"error: {failed} run(s) of experiment {args.name} failed (their runs are under multirun/{name})")
            return 1
    command = make_command(args.name, args.overrides)
    write_records(name, at)
    left, total = missing(args.name, args.overrides), len(planned(args.name, args.overrides))
    rest = ["--missing", *(["--shard", "/".join(map(str, args.shard))] if args.shard != (1, 1) else [])]
    if left and f"docs/results/{name}.md" in seals.read_sealed(ROOT):  # a sealed table waits for all its runs
        print(
            f"records: {total - len(left)} of {total} runs of {name} recorded in {records.RUNS}/{name}.jsonl; "
            f"docs/results/{name}.md waits for the other {len(left)}: "
            f"{make_command(args.name, [*args.overrides, *rest])}",
            flush=True,
        )
        return 0
    if seals.unseal(ROOT, f"docs/results/{name}.md"):
        print(f"docs/results/{name}.md: seal dropped from {seals.SEALED}", flush=True)
    table = [sys.executable, "-m", "tools.results_table", f"{records.RUNS}/{name}.jsonl", f"--command={command}"]
    own = read(args.name).get("experiment_table")  # an experiment whose committed table another tool writes
    results, figures = (
        (own.replace("{suite_dir}", prefix), own.replace("{suite_dir}", prefix))
        if own
        else (
            f"docs/results/{name}",
            f"docs/figures/{name}",
        )
    )
    table += [f"--out={results}.md", f"--plot={figures}_by_depth.png"]
    table += [f"--curves={figures}_curves.png", f"--lengths={figures}_by_length.png"]
    if subprocess.call(table, cwd=ROOT):
        return 1
    thens = [] if args.no_then else thens_of(args.name)
    # the analyses read run directories: after a part, every run's must be here; --table-only needs some
    if one_by_one and not all_here(name, planned(args.name, args.overrides)):
        why = f"some runs of {name} were trained on another machine"
    elif args.table_only and not any_here(name):
        why = f"multirun/{name} holds none (a fresh clone: the table comes from the committed records)"
    else:
        why = ""
    if thens and why:
        first = thens[0].replace("{suite_dir}", prefix)
        print(
            f"experiment_then skipped: it reads the run directories, and {why}; {command} trains them all here, "
            f"or run it once they are: python -m {first}",
            flush=True,
        )
        thens = []
    for then in thens:  # analyses of the trained runs, e.g. studies.long_range
        then = then.replace("{suite_dir}", prefix)
        print(f"then: python -m {then}", flush=True)
        if subprocess.call([sys.executable, "-m", *shlex.split(then)], cwd=ROOT):
            return 1
    if refresh_headline([f"docs/results/{name}.md", *written_by([t.replace("{suite_dir}", prefix) for t in thens])]):
        return 1
    print(f"experiment {name}: {time.perf_counter() - start_all:.0f} s wall time", flush=True)
    return 0


def progress(root: Path = ROOT) -> list[str]:
    """One line for each committed records file that holds fewer runs than its experiment's grids plan: a
    sealed table rerun in parts, or a replayed table drawn from a part of its grid."""
    sealed, out = seals.read_sealed(root), []
    for path in sorted((root / records.RUNS).rglob("*.jsonl")):
        name = str(path.relative_to(root / records.RUNS).with_suffix(""))
        experiment, prefix = Path(name).name, str(Path(name).parent)
        if not (ROOT / "conf" / "experiment" / f"{experiment}.yaml").is_file():
            continue
        overrides = [f"scale={prefix}"] if prefix != "." else []
        have = {tuple(json.loads(line)["overrides"]) for line in path.read_text().splitlines() if line.strip()}
        left, total = len(missing(experiment, overrides, have)), len(planned(experiment, overrides))
        table = f"docs/results/{name}.md"
        if left:
            state = "sealed until they are all recorded" if table in sealed else "replayed from the recorded ones"
            rest = make_command(experiment, [*overrides, "--missing"])
            out.append(
                f"{table}: {total - left} of the {total} runs its grids plan are recorded, {state}; the rest: {rest}"
            )
        elif table in sealed:  # every run is in, but nobody has drawn the table yet
            out.append(
                f"{table}: all {total} runs its grids plan are recorded, the table still sealed: draw it "
                f"({make_command(experiment, [*overrides, '--table-only'])}) and bring what restates it up to date"
            )
    return out


def make_command(name: str, args: list[str]) -> str:
    """``make experiment E=<name> ARGS='<args>'`` (no ARGS without args), as a shell line."""
    return shlex.join(["make", "experiment", f"E={name}", *([f"ARGS={' '.join(args)}"] if args else [])])


def any_here(name: str) -> bool:
    """Does ``multirun/<name>`` hold at least one finished run directory on this machine?"""
    root = ROOT / "multirun" / name
    return root.is_dir() and bool(records.run_dirs(root))


def all_here(name: str, runs: list[list[str]]) -> bool:
    """Does every run have its finished run directory under ``multirun/<name>`` on this machine?"""
    root = ROOT / "multirun" / name
    here = {tuple(records.overrides_of(d)) for d in records.run_dirs(root)} if root.is_dir() else set()
    return all(tuple(records.key_of(run)) in here for run in runs)


def write_records(name: str, at: str) -> None:
    """The slim records of ``multirun/<name>``'s runs into ``docs/results/runs/<name>.jsonl`` (the table is drawn
    from them once they hold every planned run; ``main`` then drops the table's seal)."""
    if not (ROOT / "multirun" / name).is_dir():  # --table-only on a fresh clone: the committed records
        return
    print(f"records: {records.write_from_runs(ROOT / 'multirun' / name, name, at).relative_to(ROOT)}", flush=True)


def written_by(thens: list[str]) -> list[str]:
    """The tables the analyses write (their ``--out``): ``studies.long_range ... --out X.md`` writes ``X.md``."""
    outs = []
    for then in thens:
        words = shlex.split(then)
        outs += [words[k + 1] for k, w in enumerate(words[:-1]) if w == "--out"]
    return outs


def refresh_headline(tables: list[str]) -> int:
    """Read README's headline numbers again when one comes from one of ``tables`` (docs/results/headline.json):
    the experiment's own table, and those its analyses wrote."""
    if not (ROOT / headline.HEADLINE).is_file():  # a checkout without the headline (a test's copy): none to read
        return 0
    rows = headline.read(ROOT)["rows"]
    if not any(spec["file"] in tables for row in rows for spec in row["values"]):
        return 0
    try:
        headline.write(ROOT)
    except headline.Problem as e:
        print(f"error: README's headline table: {e}")
        return 1
    print(f"README.md: headline table read again from {headline.HEADLINE}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
