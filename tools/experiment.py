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
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tools import records, replay

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="an experiment of conf/experiment/")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides added to every grid")
    parser.add_argument("--table-only", action="store_true", help="only rebuild the table from existing runs")
    parser.add_argument(
        "--no-then", action="store_true", help="skip the experiment's analysis (experiment_then, e.g. pruning)"
    )
    args = parser.parse_args(argv)
    grids = grids_of(args.name)
    prefix = suite_dir(args.overrides)
    extra = ["trainer.resume=auto"] if resumes(args.name) else []
    start_all = time.perf_counter()
    at = records.commit()  # the commit the runs run at (HEAD when they start)
    if not args.table_only:
        for k, grid in enumerate(grids, start=1):
            cmd = [sys.executable, "train.py", "-m", f"experiment={args.name}", *grid, *extra, *args.overrides]
            print(f"[{k}/{len(grids)}] {shlex.join(cmd[1:])}", flush=True)
            start = time.perf_counter()
            if subprocess.call(cmd, cwd=ROOT):
                print(
                    f"error: grid {k} of experiment {args.name} failed (its runs are under multirun/{prefix}{args.name})"
                )
                return 1
            print(f"[{k}/{len(grids)}] done in {time.perf_counter() - start:.0f} s", flush=True)
    name = f"{prefix}{args.name}"
    command = shlex.join(
        ["make", "experiment", f"E={args.name}", *([f"ARGS={' '.join(args.overrides)}"] if args.overrides else [])]
    )
    write_records(name, at)
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
    for then in [] if args.no_then else thens_of(args.name):  # analyses of the trained runs, e.g. studies.long_range
        then = then.replace("{suite_dir}", prefix)
        print(f"then: python -m {then}", flush=True)
        if subprocess.call([sys.executable, "-m", *shlex.split(then)], cwd=ROOT):
            return 1
    if refresh_headline(f"docs/results/{name}.md"):
        return 1
    print(f"experiment {name}: {time.perf_counter() - start_all:.0f} s wall time", flush=True)
    return 0


def write_records(name: str, at: str) -> None:
    """The slim records of ``multirun/<name>``'s runs into ``docs/results/runs/<name>.jsonl`` (the table is drawn
    from them), and the table's seal dropped: from now on it is replayed from its records."""
    if not (ROOT / "multirun" / name).is_dir():  # --table-only on a fresh clone: the committed records
        return
    print(f"records: {records.write_from_runs(ROOT / 'multirun' / name, name, at).relative_to(ROOT)}", flush=True)
    if replay.unseal(ROOT, f"docs/results/{name}.md"):
        print(f"docs/results/{name}.md: seal dropped from {replay.SEALED}", flush=True)


def refresh_headline(table: str) -> int:
    """Read README's headline numbers again when one comes from ``table`` (docs/results/headline.json)."""
    from tools import check_docs

    rows = check_docs.read_headline()["rows"]
    if not any(spec["file"] == table for row in rows for spec in row["values"]):
        return 0
    try:
        check_docs.write_headline()
    except check_docs.Problem as e:
        print(f"error: README's headline table: {e}")
        return 1
    print(f"README.md: headline table read again from {check_docs.HEADLINE}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
