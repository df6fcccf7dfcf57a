"""The tutorials (tutorials/*.py, jupytext percent scripts) run as plain scripts and reach their last cell.

Each is started as ``python tutorials/<name>.py`` from the repository root, as the tutorial's
README says to; every one asserts its own numerical claims (equivalences, the chain Laplacian; part 5
recomputes every committed essay verdict and asserts the claims its prose makes), so a zero exit
status means those held.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# script -> a line it prints only after its checks have passed
TUTORIALS = {
    "01_attention_is_message_passing.py": "part 1 done: all equivalence checks passed",
    "02_one_encoder_three_aggregators.py": "sparse == dense for every aggregator on both graphs",
    "03_graphs_for_sentences.py": "chain Laplacian eigenvectors are cosines of the position",
    "04_hardware_lottery.py": "sparse and dense outputs agree on every batch",
    "05_what_the_experiments_found.py": "claims checked against docs/results/, tiny runs finished for tree, complete",
    "06_a_pretrained_transformer_is_a_graph_network.py": "part 6 done: MiniLM == BertModel, dependency graph run",
}


def test_every_tutorial_is_listed():
    on_disk = {p.name for p in (ROOT / "tutorials").glob("[0-9][0-9]_*.py")}
    assert on_disk == set(TUTORIALS)


# what a cell of path arithmetic or environment setup writes: tutorials/_setup.py does it once for every part
SETUP_WORDS = ("sys.path", "os.chdir", "__file__", "Path.cwd", "os.environ", "parent.parent", "DGLBACKEND")


@pytest.mark.parametrize("script", sorted(TUTORIALS))
def test_each_part_opens_on_its_idea_after_one_line_of_shared_setup(script):
    """A part's setup is one line of its first code cell (``from _setup import ...``, the helper every part
    shares; at most two lines), and no cell does path arithmetic or sets the environment: on the website
    (tools/site.py) the reader meets the idea, not the plumbing."""
    text = (ROOT / "tutorials" / script).read_text()
    cells = [c for c in text.split("\n# %%") if not c.startswith(" [markdown]")][1:]  # code cells, header aside
    setup = [line for line in cells[0].splitlines() if "_setup" in line]
    assert 1 <= len(setup) <= 2 and setup[0].startswith("from _setup import "), setup
    assert not [line for line in text.splitlines() if "_setup" in line and line not in setup]
    bad = [(n, line) for n, line in enumerate(text.splitlines(), 1) if any(w in line for w in SETUP_WORDS)]
    assert bad == [], f"{script}: setup outside tutorials/_setup.py: {bad}"


@pytest.mark.parametrize("script", sorted(TUTORIALS))
def test_tutorial_runs(script):
    env = {
        **os.environ,
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "WANDB_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
        "DGLBACKEND": "pytorch",
    }
    res = subprocess.run(
        [sys.executable, f"tutorials/{script}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert TUTORIALS[script] in res.stdout, res.stdout[-3000:]
