"""studies/: each study a package that runs as ``python -m studies.<name>`` and says what it writes, and no
reference to a study's old home (``tools.<name>``, ``tools/<name>.py``) left anywhere (studies/moved.py)."""

from __future__ import annotations

import importlib
import re
import runpy
import sys

import pytest

from studies import moved
from tests.conftest import ROOT

STUDIES = sorted(p.parent.name for p in (ROOT / "studies").glob("*/__init__.py"))


def test_the_studies_are_the_moved_modules():
    assert STUDIES == sorted(new.split(".", 1)[1] for new in moved.MOVED.values())
    assert not [s for s in STUDIES if (ROOT / "tools" / f"{s}.py").exists()]


@pytest.mark.parametrize("name", STUDIES)
def test_a_study_names_what_it_writes_and_how(name):
    folder = ROOT / "studies" / name
    readme = (folder / "README.md").read_text()
    assert readme.startswith(f"# studies.{name}\n")
    written = re.findall(r"`(docs/results/[\w./-]+)`", readme.split("Writes:", 1)[1].split("Run:", 1)[0])
    assert written and (ROOT / written[0]).exists(), f"{name}/README.md: names no existing docs/results file"
    assert f"studies.{name}" in readme.split("Run:", 1)[1] or "make " in readme.split("Run:", 1)[1]
    module = importlib.import_module(f"studies.{name}")
    assert getattr(module, "ROOT", ROOT) == ROOT  # a path from the repository root, one folder deeper now


@pytest.mark.parametrize("name", STUDIES)
def test_python_m_studies_name_runs_its_main(name, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [f"studies.{name}", "--help"])
    with pytest.raises(SystemExit) as stop:
        runpy.run_module(f"studies.{name}", run_name="__main__", alter_sys=False)
    assert stop.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_the_rewrite_of_old_references():
    t = "tools"  # written apart, so that this file holds no old reference itself
    old = (
        f"python -m {t}.long_range multirun/long_range\n"
        f"from {t} import essay\n"
        f"from {t} import graph_probe as gp\n"
        f"from {t} import check_docs\n"
        f"[`{t}/long_range.py`](../{t}/long_range.py) and {t}/prune_heads.py's mask\n"
        f"tests/{t}/test_essay.py, {t}.results_table, {t}.long_range_x\n"
    )
    new = moved.rewrite(old)
    assert new == (
        "python -m studies.long_range multirun/long_range\n"
        "from studies import essay\n"
        "from studies import graph_probe as gp\n"
        "from tools import check_docs\n"
        "[`studies/long_range`](../studies/long_range/) and studies/prune_heads's mask\n"
        "tests/tools/test_essay.py, tools.results_table, tools.long_range_x\n"
    )
    assert moved.rewrite(new) == new


def test_no_old_study_reference_is_left(capsys):
    assert moved.main(["--check"]) == 0, capsys.readouterr().out
