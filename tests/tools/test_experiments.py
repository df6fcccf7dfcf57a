"""Every conf/experiment file: it has a command header, every point of its sweep composes and passes the
config checks, and tools/experiment.py runs its grids then its table. (The other subjects this file held are
tests/models/test_pooling_and_heads.py, tests/models/test_positional.py, tests/tools/test_attention_tools.py
and tests/tools/test_results_table_factors.py.)"""

import csv
import json
import re
import subprocess

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import CONF, compose_config
from tools import experiment
from tools.experiment import write_records as WRITE_RECORDS  # the real one: tests/tools/conftest.py stubs it out

EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


# --------------------------------------------------------------------------------------------
# Every experiment file: composes, and every point of its sweep is a valid config
# --------------------------------------------------------------------------------------------
def _product(items: list[tuple[str, str]]) -> list[list[str]]:
    points = [[]]
    for key, values in items:
        points = [p + [f"{key}={v.strip()}"] for p in points for v in str(values).split(",")]
    return points


def sweep_points(name: str) -> list[list[str]]:
    """The override lists of an experiment's runs: its hydra.sweeper.params, or every line of its
    experiment_grids (tools/experiment.py runs them), or [[]] for a single run."""
    spec = yaml.safe_load((CONF / "experiment" / f"{name}.yaml").read_text())
    if spec.get("experiment_grids"):
        return [
            p for line in spec["experiment_grids"] for p in _product([tuple(o.split("=", 1)) for o in line.split()])
        ]
    params = (spec.get("hydra") or {}).get("sweeper", {}).get("params", {})
    return _product(list(params.items()))


def test_experiment_runner_runs_every_grid_then_the_table(tmp_path, monkeypatch):
    """tools/experiment.py: one multirun per line of experiment_grids, in order, with the extra overrides,
    then the table of the experiment's sweep directory."""
    from tools import experiment

    calls = []
    monkeypatch.setattr(experiment.subprocess, "call", lambda cmd, cwd=None: calls.append(cmd[1:]) or 0)
    assert experiment.main(["sst", "trainer.max_epochs=1"]) == 0
    grids = yaml.safe_load((CONF / "experiment" / "sst.yaml").read_text())["experiment_grids"]
    assert len(calls) == len(grids) + 1
    for call, line in zip(calls, grids):
        assert call[:3] == ["train.py", "-m", "experiment=sst"] and call[3:] == line.split() + ["trainer.max_epochs=1"]
    assert calls[-1][:3] == ["-m", "tools.results_table", "docs/results/runs/sst.jsonl"]
    assert experiment.grids_of("listops_best") == [["seed=0,1,2"]]  # its 3 seeds, one grid
    calls.clear()  # an essay experiment: runs resume, scale=small goes to its own directories
    assert experiment.main(["heads", "scale=small"]) == 0
    assert calls[0][3:] == ["model.num_heads=1,2,4,8", "seed=0,1,2", "trainer.resume=auto", "scale=small"]
    assert calls[1][:3] == ["-m", "tools.results_table", "docs/results/runs/small/heads.jsonl"]
    assert "--out=docs/results/small/heads.md" in calls[1]
    assert calls[2][:3] == ["-m", "studies.prune_heads", "multirun/small/heads/model.num_heads=8,seed=0"]
    calls.clear()  # an experiment_then analysis runs after the table
    assert experiment.main(["sst_tai", "--table-only"]) == 0
    assert calls[0][:3] == ["-m", "tools.results_table", "docs/results/runs/sst_tai.jsonl"] and len(calls) == 1
    calls.clear()  # a sealed table without its records: no table, the seal holds
    monkeypatch.setattr(experiment.records, "read", lambda name: [])
    monkeypatch.setattr(experiment.seals, "read_sealed", lambda root: {"docs/results/aggregation.md": {}})
    assert experiment.main(["aggregation", "--table-only"]) == 0 and calls == []
    with pytest.raises(SystemExit, match="no experiment 'nope'; valid: .*sst"):
        experiment.grids_of("nope")


def test_experiment_files_have_a_command_header():
    for name in EXPERIMENTS:
        text = (CONF / "experiment" / f"{name}.yaml").read_text()
        assert text.startswith("# @package _global_"), name
        header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
        commands = re.findall(r"experiment=(\w+)|make (\w+)|E=(\w+)", header)
        assert any(name in c for c in commands), f"{name}.yaml: its header must give the command that runs it"


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_sweep_point_composes_and_passes_the_config_checks(name):
    from engine.config import check_config

    points = sweep_points(name)
    assert len(points) >= 1
    for point in points:
        cfg = compose_config([f"experiment={name}", *point])
        check_config(cfg)
        for override in point:
            key, value = override.split("=")
            if key in ("dataset",):  # a config group: compare its name
                assert cfg.dataset.name == value, (name, override)
                continue
            got = cfg[key].name if key in ("model", "graph", "optim") else OmegaConf.select(cfg, key)
            assert str(got).lower() == value.lower(), (name, override)


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_runs_a_few_steps(name, tmp_path):
    """One run per grid line of each experiment (each key at its first value), shrunk to seconds (pytest -m slow)."""
    from tests.conftest import assert_breakdowns_match_test_acc, run_script

    def check(run_dir):  # a run too short to learn: its numbers must at least agree with one another
        results = json.loads((run_dir / "results.json").read_text())
        assert_breakdowns_match_test_acc(results)
        with open(run_dir / "metrics.csv") as f:
            assert results["best_val_acc"] == max(float(r["val_acc"]) for r in csv.DictReader(f))

    tiny = ["debug=tiny", "trainer.max_epochs=1", "dataset.num_train=64", "dataset.num_val=32", "dataset.num_test=32"]
    spec = yaml.safe_load((CONF / "experiment" / f"{name}.yaml").read_text())
    if spec.get("experiment_grids"):  # one run per grid line (its first value of every key)
        data_dir = (spec.get("dataset") or {}).get("data_dir")
        if data_dir and not (CONF.parent / data_dir).is_dir():
            pytest.skip(f"experiment={name} reads {data_dir}, which is not beside this checkout")
        if "override /dataset" in str(spec.get("defaults")) and "listops_long" in str(spec.get("defaults")):
            tiny.append("dataset.min_length=20")  # debug=tiny caps lengths at 40
        for k, line in enumerate(spec["experiment_grids"]):
            first = [o.split(",")[0] for o in line.split()]
            run_script("train.py", f"experiment={name}", *first, *tiny, f"hydra.run.dir={tmp_path}/{k}", timeout=900)
            check(tmp_path / str(k))
        return
    points = sweep_points(name)
    if points == [[]]:
        run_script("train.py", f"experiment={name}", *tiny, f"hydra.run.dir={tmp_path}/run")
        results = [tmp_path / "run" / "results.json"]
    else:
        run_script("train.py", "-m", f"experiment={name}", *tiny, f"hydra.sweep.dir={tmp_path}/sweep", timeout=900)
        results = sorted((tmp_path / "sweep").glob("*/results.json"))
    assert len(results) == len(points)
    for path in results:
        check(path.parent)


# --------------------------------------------------------------------------------------------
# A rerun in parts: the runs without a committed record, a few at a time; the seal holds until all are in
# --------------------------------------------------------------------------------------------
def test_the_plan_holds_every_committed_record():
    """Each committed record is a run its experiment's grids plan, keyed as Hydra's sweeper names the job: a
    grid edited under its records (a run renamed, a value dropped) fails here."""
    from tools import experiment, records

    checked = 0
    for path in sorted((CONF.parent / records.RUNS).rglob("*.jsonl")):
        name = path.relative_to(CONF.parent / records.RUNS).with_suffix("")
        overrides = [f"scale={name.parent}"] if str(name.parent) != "." else []
        plan = {tuple(records.key_of(run)) for run in experiment.planned(name.name, overrides)}
        keys = [tuple(r["overrides"]) for r in records.read(str(name))]
        assert set(keys) <= plan, (str(name), sorted(set(keys) - plan)[:2])
        checked += len(keys)
    assert checked > 300
    heads = experiment.planned("heads", [])
    assert len(heads) == 12 and heads[0] == ["experiment=heads", "model.num_heads=1", "seed=0", "trainer.resume=auto"]
    assert records.key_of(heads[0]) == ["experiment=heads", "model.num_heads=1", "seed=0"]
    # an override added to every grid replaces a swept key, as Hydra's sweeper does
    assert [r[2] for r in experiment.planned("heads", ["seed=2"])] == ["seed=2"] * 4


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository whose heads table is sealed and whose records hold 5 of its 12 runs; train.py and the
    table writer are faked: a training call writes a finished run directory, every call is kept."""
    from tools import experiment, records, seals

    root = tmp_path / "repo"
    root.mkdir()
    (root / "conf").symlink_to(CONF)
    (root / "docs" / "results").mkdir(parents=True)
    (root / "docs" / "results" / "heads.md").write_text(
        "per-run records not committed; rerun: `make experiment E=heads`\n\n| h | acc |\n|---|---|\n| 1 | 0.5 |\n"
    )
    seals.seal(root, "docs/results/heads.md", "make experiment E=heads")
    for module in (experiment, records):
        monkeypatch.setattr(module, "ROOT", root)
    monkeypatch.setattr(experiment, "write_records", WRITE_RECORDS)  # into this copy: conftest stubs it out
    plan = experiment.planned("heads", [])
    done = [{"overrides": records.key_of(run), "seed": 0, "commit": "a" * 40, "test_acc": 0.5} for run in plan[::3]]
    records.write("heads", done[:4] + [{**done[0], "overrides": records.key_of(plan[1])}])
    calls = []

    def call(cmd, cwd=None, env=None, stdout=None, stderr=None):
        calls.append((cmd[1:], env, stdout))
        if cmd[1] == "train.py":
            key = records.key_of(cmd[3:])
            run = root / "multirun" / "heads" / ",".join(o for o in key if not o.startswith("experiment="))
            (run / ".hydra").mkdir(parents=True)
            (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in cmd[3:]))
            seed = int(next(o for o in key if o.startswith("seed="))[5:])
            (run / "results.json").write_text(json.dumps({"seed": seed, "test_acc": 0.6, "model": "transformer"}))
        return 0

    monkeypatch.setattr(experiment.subprocess, "call", call)
    return root, plan, calls


def test_a_rerun_in_parts_trains_the_missing_runs_and_the_seal_holds_until_every_run_is_recorded(repo, capsys):
    from tools import experiment, records, seals

    root, plan, calls = repo
    have = {tuple(r["overrides"]) for r in records.read("heads")}
    todo = [run for run in plan if tuple(records.key_of(run)) not in have]
    assert len(have) == 5 and len(todo) == 7 and experiment.missing("heads", []) == todo
    assert experiment.main(["heads", "--missing", "--max-runs", "3"]) == 0  # a first part: 3 runs
    assert [c[0] for c in calls] == [["train.py", "-m", *run] for run in todo[:3]]
    assert len(records.read("heads")) == 8 and "docs/results/heads.md" in seals.read_sealed(root)
    out = capsys.readouterr().out
    assert (
        "8 of 12 runs of heads recorded" in out
        and "waits for the other 4: make experiment E=heads ARGS=--missing" in out
    )
    assert [line.split(": 8 of")[0] for line in experiment.progress(root)] == ["docs/results/heads.md"]
    calls.clear()  # the rest, two at a time, each on its share of the cores, its output in a log
    assert experiment.main(["heads", "--missing", "--jobs", "2"]) == 0
    trained = [c for c in calls if c[0][0] == "train.py"]
    assert sorted(c[0][2:] for c in trained) == sorted(todo[3:])
    assert all(c[1]["OMP_NUM_THREADS"] and c[2] is not None for c in trained)
    assert len(list((root / "multirun" / "heads" / ".logs").glob("run*.log"))) == 4
    assert len(records.read("heads")) == 12 and seals.read_sealed(root) == {}
    assert calls[-1][0][:3] == ["-m", "tools.results_table", "docs/results/runs/heads.jsonl"]
    assert "experiment_then skipped" in capsys.readouterr().out  # 5 runs were trained elsewhere: no pruning here
    assert experiment.progress(root) == []
    calls.clear()  # nothing left to train: the table only
    assert experiment.main(["heads", "--missing"]) == 0 and [c[0][1] for c in calls] == ["tools.results_table"]


def test_a_part_that_fails_writes_no_table_and_bad_counts_are_refused(repo, monkeypatch, capsys):
    from tools import experiment, records, seals

    root, plan, calls = repo
    monkeypatch.setattr(experiment.subprocess, "call", lambda cmd, **kw: calls.append(cmd) or 1)
    assert experiment.main(["heads", "--missing", "--max-runs", "1"]) == 1
    assert "error: 1 run(s) of experiment heads failed" in capsys.readouterr().out
    assert len(records.read("heads")) == 5 and "docs/results/heads.md" in seals.read_sealed(root)
    for bad in (["--max-runs", "-1"], ["--jobs", "0"]):
        with pytest.raises(SystemExit):
            experiment.main(["heads", *bad])
    assert "--max-runs must be >= 0 and --jobs >= 1" in capsys.readouterr().err


def test_two_checkouts_split_the_plan_by_shard_in_parts_and_their_runs_join_the_records(repo, capsys):
    from tools import experiment, records, seals

    root, plan, calls = repo
    todo, committed = experiment.missing("heads", []), records.path_of("heads").read_text()
    trained, elsewhere = {}, []
    for k in (1, 2):  # two checkouts of the same commit, each trains its share in two parts
        records.path_of("heads").write_text(committed)
        mine = []
        for part in (["--max-runs", "1"], []):  # the first part's record is in before the second starts
            calls.clear()
            assert experiment.main(["heads", "--missing", "--shard", f"{k}/2", *part]) == 0
            mine += [c[0][2:] for c in calls if c[0][0] == "train.py"]
        assert f"'ARGS=--missing --shard {k}/2'" in capsys.readouterr().out  # what this checkout's next part is
        trained[k] = mine
        assert len(mine) >= 3 and mine == [run for run in plan[k - 1 :: 2] if run in todo]  # by place in the plan
        assert "docs/results/heads.md" in seals.read_sealed(root)
        elsewhere.append(root.parent / f"checkout{k}")
        (root / "multirun").rename(elsewhere[-1])
    assert sorted(sum(trained.values(), [])) == sorted(todo)  # each missing run trained once, by one checkout
    records.path_of("heads").write_text(committed)  # back in the first: the runs of both join its records
    assert records.main([str(elsewhere[0] / "heads"), "heads"]) == 2  # outside git: which commit is unknown
    assert "is in no git checkout: name the commit its runs ran at with --at" in capsys.readouterr().err
    assert records.main([str(elsewhere[0] / "heads"), "heads", "--at", "3e799c8e2b6"]) == 2  # not a commit here
    assert "--at 3e799c8e2b6: no such commit in this repository" in capsys.readouterr().err
    shas = []  # two commits of this repository, named short: the records hold them in full
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    for k in range(2):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"c{k}"], cwd=root, check=True)
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        shas.append(sha.stdout.strip())
    for sha, where in zip(shas, elsewhere):
        assert records.main([str(where / "heads"), "heads", "--at", sha[:7]]) == 0
    got = [r["commit"] for r in records.read("heads")]
    assert len(got) == 12 and sorted(got) == sorted(
        ["a" * 40] * 5 + [shas[0]] * len(trained[1]) + [shas[1]] * len(trained[2])
    )
    (line,) = experiment.progress(root)  # all recorded, not yet drawn: check_docs says what to do
    assert "heads.md: all 12 runs its grids plan are recorded, the table still sealed: draw it (make experiment" in line
    calls.clear()
    assert experiment.main(["heads", "--table-only"]) == 0  # every planned run recorded: drawn, seal dropped
    assert seals.read_sealed(root) == {} and calls[-1][0][1] == "tools.results_table"  # pruning skipped:
    assert "experiment_then skipped: it reads the run directories, and multirun/heads holds none" in (
        capsys.readouterr().out
    )  # no run directory here to prune
    for bad, says in (
        (["--shard", "3/2"], "K must be 1 to N"),
        (["--shard", "x"], "is not K/N"),
        (["--shard", "0/2"], "K must be 1 to N"),
        (["--shard", "1/2", "--table-only"], "--table-only trains none"),
    ):
        with pytest.raises(SystemExit):
            experiment.main(["heads", "--missing", *bad])
        assert says in capsys.readouterr().err


def test_the_headline_is_read_again_when_an_analysis_wrote_one_of_its_tables(monkeypatch):
    from tools import headline

    then = "studies.long_range multirun/long_range --out docs/results/long_range_lengths.md --plot x.png"
    assert experiment.written_by([then, "prune_heads multirun/heads"]) == ["docs/results/long_range_lengths.md"]
    rows = {"rows": [{"values": [{"file": "docs/results/long_range_lengths.md"}]}]}
    monkeypatch.setattr(headline, "read", lambda root: rows)
    written = []
    monkeypatch.setattr(headline, "write", lambda root: written.append(1))
    assert experiment.refresh_headline(["docs/results/long_range.md"]) == 0 and written == []
    tables = ["docs/results/long_range.md", *experiment.written_by([then])]
    assert experiment.refresh_headline(tables) == 0 and written == [1]


def test_only_trains_the_selected_runs_split_by_shard_and_refuses_a_selection_that_matches_nothing(repo, capsys):
    from tools import experiment

    root, plan, calls = repo
    todo = experiment.missing("heads", [])
    chosen = [run for run in plan if "model.num_heads=2" in run or "model.num_heads=8" in run]
    for k in (1, 2):  # the selection is cut before the shards: each checkout trains its half of the chosen runs
        calls.clear()
        assert experiment.main(["heads", "--missing", "--only", "model.num_heads=2,8", "--shard", f"{k}/2"]) == 0
        trained = [c[0][2:] for c in calls if c[0][0] == "train.py"]
        assert trained and trained == [run for run in chosen[k - 1 :: 2] if run in todo]
        assert f"'ARGS=--missing --shard {k}/2'" in capsys.readouterr().out  # the table waits for the whole plan
    twice = [("model.num_heads", ("2",)), ("model.num_heads", ("8",))]  # a key given twice takes both's values
    assert experiment.select("heads", plan, twice) == chosen
    with pytest.raises(SystemExit) as stop:  # values each plan holds, but no run holds together
        experiment.select("x", [["model=a", "seed=0"], ["model=b", "seed=1"]], [("model", ("a",)), ("seed", ("1",))])
    assert str(stop.value) == "error: --only model=a seed=1: no run of x sets these together"
    for bad, says in (
        (["--only", "model.num_heads=3"], "no run of heads takes that value; its model.num_heads values: 1, 2, 4, 8"),
        (["--only", "model.num_heads=2,3"], "--only model.num_heads=3: no run of heads takes that value"),
        (["--only", "graph=tree"], "no run of heads sets graph; its runs set model.num_heads, seed"),
    ):
        with pytest.raises(SystemExit) as stop:
            experiment.main(["heads", "--missing", *bad])
        assert says in str(stop.value)
    for bad, says in (
        (["--only", "graph"], "'graph' is not KEY=VALUE[,VALUE]; write e.g. --only graph=tree"),
        (["--only", "seed=0", "--table-only"], "--only picks runs to train and --table-only trains none"),
    ):
        with pytest.raises(SystemExit):
            experiment.main(["heads", *bad])
        assert says in capsys.readouterr().err
