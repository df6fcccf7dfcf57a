"""The import arrows of docs/architecture.md's layout, read from the source: ``data/`` and ``models/`` sit below
``engine/``, ``tools/``, ``studies/``, ``bench/`` and the entry scripts and import none of them, not even inside a
function; ``data/`` imports nothing of ``models/``. Every module is parsed (ast), so an import that runs only
when a function is called counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

ABOVE = ("engine", "tools", "studies", "bench", "tutorials", "train", "evaluate")  # what data/ and models/ sit below
FORBIDDEN = {"models": ABOVE, "data": (*ABOVE, "models")}


def imported(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in the file, wherever it is (a function, a branch, a try), and every
    ``importlib.import_module``/``__import__`` of a constant name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


def upward_imports(root: Path = ROOT) -> list[str]:
    """``path:line imports module`` for each import in data/ or models/ of a package they must not import."""
    out = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((root / package).rglob("*.py")):
            for line, module in imported(path):
                if module.split(".")[0] in forbidden:
                    out.append(f"{path.relative_to(root)}:{line} imports {module}")
    return out


def test_data_and_models_import_nothing_above_them():
    assert upward_imports() == []


def test_the_scan_sees_imports_inside_functions(tmp_path):
    """Each way a module could reach upward is found: at the top, inside a function, by importlib, and data's
    import of models."""
    (tmp_path / "models").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "models" / "a.py").write_text(
        "import torch\nfrom engine.placement import pick_device\n\n\ndef f():\n    import tools.stats\n"
        "    from data.graphs import GRAPH_KINDS\n"
    )
    (tmp_path / "data" / "b.py").write_text(
        "import importlib\n\n\ndef g():\n    from models import registry\n    importlib.import_module('train')\n"
    )
    assert upward_imports(tmp_path) == [
        "models/a.py:2 imports engine.placement",
        "models/a.py:6 imports tools.stats",
        "data/b.py:5 imports models",
        "data/b.py:6 imports train",
    ]
