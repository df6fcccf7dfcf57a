"""One run, several experiments: copy a recorded run into every other experiment that plans the very same run.

    python -m tools.share graph_choice --from positional aggregation     # fill graph_choice's records from those
    python -m tools.share heads aggregation --from positional --dry-run  # say what would be copied, write nothing

The essay's experiments overlap. The full-scale Transformer on the complete graph with 4 heads and sinusoidal
positions is graph_choice's ``model=transformer graph=complete``, aggregation's ``model=transformer``, heads'
``model.num_heads=4`` and positional's ``model.positional=sinusoidal``, seed for seed: four names for one training
run. Training it four times costs four times the CPU and gives nothing the first did not (on one machine, at one
thread count, training is bit for bit repeatable: docs/long_runs.md).

A run of experiment A is the same run as one of experiment B when Hydra composes them to the same config
(:func:`config_of`) once what does not change the computation is left out: the experiment's own bookkeeping
(``experiment_grids``, ``experiment_then``, ``suite``), the logger, ``trainer.resume`` and ``trainer.progress``, and
the settings the rest of the config leaves unread (:data:`UNREAD`: ``model.pe_dim`` and ``model.pe_graph`` unless
``model.positional`` is a structural encoding). ``tests/tools/test_share.py`` builds two such runs and checks that
their first steps are the same, bit for bit, and that a run differing in any other setting is not matched.

For each planned run of the target with no record, or a record without per-example test predictions, a source
record of the same run that kept its predictions is written into the target's ``docs/results/runs/<target>.jsonl``
under the target's own overrides, with ``shared_from`` naming the experiment and overrides it was trained as
(``--unpredicted``: a source record without predictions too, where the target has none and no source has one with
predictions), and the target's table is drawn again from its records. ``tools.queue`` does the same before each
experiment and then trains the rest. A copy is not copied again, and gathering old run directories again
(``tools.records``) does not undo it (``records.kept_more``).

A record gathered from its run directory keeps the digest of the config it trained with (``config_digest``, from
``.hydra/config.yaml``), and is compared by it; an older record without one is compared as today's ``conf/``
composes its overrides, so a record trained before a change to an experiment's defaults would be taken for today's
run (since those records, ``conf/`` has changed only comments, a grid's order and new trainer switches that default
to off, ``tools.run_config.NEUTRAL``). Runs trained on two codebases or devices (a GPU run finished on
the CPU, ``tools/gpu_grid.sh``) are the same run only up to the rounding of their hardware.
"""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
from pathlib import Path

from tools import experiment, records
from tools.run_config import digest, normalized

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def config_of(overrides: tuple[str, ...]) -> dict:
    """The resolved config a run with these command-line overrides trains with, composed from today's ``conf/``,
    normalised (``tools.run_config.normalized``)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[o for o in overrides if not o.startswith("trainer.resume=")])
    return normalized(OmegaConf.to_container(cfg, resolve=True))


def composed(overrides: tuple[str, ...]) -> dict | None:
    """:func:`config_of`, or None for overrides that no longer compose (a record older than a renamed setting:
    it names no run of today's); failures are remembered too."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    if overrides not in FAILED:
        try:
            return config_of(overrides)
        except (HydraException, OmegaConfBaseException):
            FAILED.add(overrides)
    return None


FAILED: set[tuple[str, ...]] = set()


def could_be(record: dict, cfg: dict) -> bool:
    """A record's model, graph and seed against a composed config: the test that spares most compositions."""
    model, graph = (cfg.get("model") or {}).get("name"), (cfg.get("graph") or {}).get("name")
    return (
        record.get("model", model) == model
        and record.get("graph", graph) == graph
        and str(record.get("seed", cfg.get("seed"))) == str(cfg.get("seed"))
    )


def same_config(record: dict, cfg: dict) -> bool:
    """Did the record's run train with ``cfg``? By the digest of the config it trained with where the record keeps
    one (``records.record_of``), else by composing its overrides from today's ``conf/``."""
    if record.get("config_digest"):
        return record["config_digest"] == digest(cfg)
    return composed(tuple(record["overrides"])) == cfg


def recorded() -> list[str]:
    """The full-scale experiments with committed records (``docs/results/runs/<name>.jsonl``), sorted."""
    names = {p.stem for p in (records.ROOT / records.RUNS).glob("*.jsonl")}
    return sorted(n for n in names if (experiment.ROOT / "conf" / "experiment" / f"{n}.yaml").is_file())


def matches(target: str, source: str, predicted: bool = True) -> list[tuple[list[str], dict]]:
    """``(target run, source record)`` for each planned run of ``target`` that ``source`` holds a record of, where
    ``target`` has no record of it or (a source record with predictions) one without per-example predictions.
    ``predicted``: only source records that kept their predictions; else only those that did not."""
    have = {tuple(r["overrides"]): r for r in records.read(target)}
    given = [
        r
        for r in records.read(source)
        if not r.get("shared_from") and bool(r.get("test_predictions")) == predicted  # copies are not copied again
    ]
    out = []
    for run in experiment.planned(target, []):
        old = have.get(tuple(records.key_of(run)))
        if old is not None and (old.get("test_predictions") or not predicted):
            continue  # already as good as a copy could make it
        cfg = composed(tuple(run))  # config_of leaves trainer.resume out
        if cfg is None:
            continue
        for r in given:
            if could_be(r, cfg) and same_config(r, cfg):
                out.append((run, r))
                break
    return out


def shared(run: list[str], record: dict, source: str) -> dict:
    """``record`` (a run of ``source``) as the record of ``run``."""
    by = " ".join(o for o in record["overrides"] if not o.startswith("experiment="))
    return {**record, "overrides": records.key_of(run), "shared_from": f"{source}: {by}"}


def fill(target: str, sources: list[str], dry_run: bool = False, unpredicted: bool = False) -> list[dict]:
    """Write into ``target``'s records every run ``sources`` hold of its plan: a record with predictions first,
    from whichever source has one (``unpredicted``: then one without, for runs still unrecorded); returns the
    records written (or, ``dry_run``, that would be)."""
    out, done = [], set()
    for predicted in (True, False) if unpredicted else (True,):
        for source in sources:
            if source == target:
                continue
            for run, r in matches(target, source, predicted):
                key = tuple(records.key_of(run))
                if key not in done:
                    done.add(key)
                    out.append(shared(run, r, source))
    if out and not dry_run:
        records.write(target, out)
    return out


def redraw(name: str) -> int:
    """Draw ``name``'s table (and the headline it feeds) again from its records, as a part of training does:
    ``python -m tools.experiment NAME --table-only --no-then``."""
    return subprocess.call([sys.executable, "-m", "tools.experiment", name, "--table-only", "--no-then"], cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", help="experiments whose records to fill")
    parser.add_argument("--from", dest="sources", nargs="+", required=True, help="experiments to copy runs from")
    parser.add_argument("--dry-run", action="store_true", help="say what would be copied; write nothing")
    parser.add_argument(
        "--unpredicted", action="store_true", help="also copy records without per-example test predictions"
    )
    args = parser.parse_args(argv)
    for name in {*args.targets, *args.sources}:
        experiment.read(name)  # an unknown name stops here
    for target in args.targets:
        written = fill(target, args.sources, args.dry_run, args.unpredicted)
        verb = "would copy" if args.dry_run else "copied"
        print(f"{target}: {verb} {len(written)} run(s)")
        for r in written:
            print(f"  {' '.join(o for o in r['overrides'] if not o.startswith('experiment='))} <- {r['shared_from']}")
        if written and not args.dry_run and redraw(target):
            print(f"error: {target}'s table could not be drawn again: python -m tools.experiment {target} --table-only")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
