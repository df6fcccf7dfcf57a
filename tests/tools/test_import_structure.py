"""The import structure, read from the source (``ast``, no module imported): imports go one way.

(a) ``tools/`` imports nothing from ``studies/``: a study declares the tables it replays (its ``REPLAYS``) and
``tools.replay`` finds them through ``pyproject.toml``'s ``[tool.tagnn] replays``, never by a study's name;
(b) no import circle among the repository's modules (``models/`` and ``data/`` below ``engine/``:
``tests/engine/test_structure.py``). Every import counts: at the top of a module, inside a function, and a module named by a string
literal handed to ``importlib.import_module`` or ``__import__`` (docs/architecture.md, "Layout").
"""

from __future__ import annotations

from tests.helpers.imports import cycles, graph, imported, offending


def test_tools_import_nothing_from_studies():
    found = offending("tools", "studies")
    assert not found, "tools/ must not import studies/ (declare the table in the study's REPLAYS):\n" + "\n".join(found)


def test_no_import_circle():
    found = cycles(graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_reader_sees_function_level_and_importlib_imports(tmp_path):
    """The checks above would see the imports this repository used to have: inside a function, by importlib."""
    path = tmp_path / "m.py"
    path.write_text(
        "import importlib\n"
        "def f():\n"
        "    from studies import long_range\n"
        "    importlib.import_module('studies.essay')\n"
        "    return importlib.import_module(f'studies.{name}')\n"
        "from . import sibling\n"
    )
    names = sorted(n for n, _ in imported(path, "tools.m"))
    assert names == ["importlib", "studies", "studies", "studies.essay", "studies.long_range", "tools", "tools.sibling"]
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []
