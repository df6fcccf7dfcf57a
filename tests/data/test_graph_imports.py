"""The modules of data/graphs/ and data/wordpiece.py import each other without a cycle.

A static check reads every import of every module (those inside functions too) and follows the ones between
these modules: ``from data.graphs import x`` is the submodule ``data.graphs.x`` where there is one, else the
package itself (``__init__.py``, which imports every construction). Nothing of data/graphs imports
``data.wordpiece`` or ``models`` (data sits below models). A slow test imports each module first in a fresh
interpreter, which is where an import cycle would break.
"""

import ast
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "data" / "graphs"


def module_name(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in [*sorted(PACKAGE.glob("*.py")), ROOT / "data" / "wordpiece.py"]}


def imports_of(path) -> set[str]:
    """The modules ``path`` imports (anywhere in it), as dotted names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    return {name: imports_of(path) & set(MODULES) for name, path in MODULES.items()}


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order, the first again at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_in_finds_a_cycle():
    assert cycle_in({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle_in({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_modules_are_all_read():
    assert {"data.graphs", "data.graphs.dep", "data.graphs.construction", "data.graphs.lift", "data.wordpiece"} <= set(
        MODULES
    )
    graph = import_graph()
    assert "data.graphs.dep" in graph["data.graphs"]  # the package imports its constructions
    assert graph["data.wordpiece"] >= {"data.graphs", "data.graphs.lift"}


def test_no_import_cycle_between_graphs_and_wordpiece():
    assert cycle_in(import_graph()) is None, f"import cycle: {' -> '.join(cycle_in(import_graph()))}"


def test_graphs_import_neither_wordpiece_nor_models():
    for name, path in MODULES.items():
        if name.startswith("data.graphs"):
            bad = {m for m in imports_of(path) if m == "data.wordpiece" or m.split(".")[0] == "models"}
            assert not bad, f"{name} imports {bad}"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_module_imports_first_in_a_fresh_interpreter(name):
    run = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
