"""The import arrows of docs/architecture.md's layout, read from the source: ``data/`` and ``models/`` sit below
``engine/``, ``tools/``, ``studies/``, ``bench/`` and the entry scripts and import none of them, not even inside a
function; ``data/`` imports nothing of ``models/``. Every module is parsed (ast), so an import that runs only
when a function is called counts as much as one at the top."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT
from tests.helpers.imports import imported

ABOVE = ("engine", "tools", "studies", "bench", "tutorials", "train", "evaluate")  # what data/ and models/ sit below
FORBIDDEN = {"models": ABOVE, "data": (*ABOVE, "models")}


def upward_imports(root: Path = ROOT) -> list[str]:
    """``path:line imports module`` for each import in data/ or models/ of a package they must not import (the
    module a ``from X import y`` names: X)."""
    out = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            found = sorted((line, name) for name, line in imported(path, module) if name.split(".")[0] in forbidden)
            for line, name in found:  # 'from a.b import c' reads as a.b and a.b.c: name a.b
                if not any(at == line and name.startswith(other + ".") for at, other in found):
                    out.append(f"{path.relative_to(root)}:{line} imports {name}")
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
