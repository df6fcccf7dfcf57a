"""Reading the repository's imports from its source (``ast``: no module is imported), for the structure tests
(``tests/tools/test_import_structure.py``, ``tests/engine/test_structure.py``). Every import counts: at the top of a
module, inside a function, and a module named by a string handed to ``importlib.import_module`` or ``__import__``."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tools", "studies", "models", "data", "engine")
SCRIPTS = ("train.py", "evaluate.py")


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def sources() -> dict[str, Path]:
    """Every module of the packages and the entry scripts, by its dotted name."""
    paths = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))] + [ROOT / s for s in SCRIPTS]
    return {module_of(p): p for p in paths}


def _literal(node: ast.expr) -> str | None:
    """A module name written as a string: ``"studies.x"``, or an f-string's text before its first field."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value).rstrip(".") or None
    return None


def imported(path: Path, module: str) -> list[tuple[str, int]]:
    """Every name ``path`` imports (``from a import b``: ``a.b`` and ``a``), with its line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # a relative import, resolved against the module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            out.append((base, node.lineno))
            out += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "__import__") and (text := _literal(node.args[0])):
                out.append((text, node.lineno))
    return out


def graph() -> dict[str, dict[str, int]]:
    """module -> {project module it imports: the line}: each name resolved to its longest known module."""
    mods = sources()
    edges: dict[str, dict[str, int]] = {m: {} for m in mods}
    for module, path in mods.items():
        for name, line in imported(path, module):
            parts = name.split(".")
            target = next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in mods), None)
            if target and target != module:
                edges[module].setdefault(target, line)
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan), as ``[a, b, ..., a]``."""
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(v: str) -> None:  # recursion depth: the longest import chain, a few dozen
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    out = []
    for group in groups:  # the shortest circle from the group's first module back to it, inside the group
        start, members, before, queue = min(group), set(group), {}, [min(group)]
        while start not in before:
            v = queue.pop(0)
            for w in sorted(edges[v]):
                if w in members and w not in before:
                    before[w] = v
                    queue.append(w)
        path = [start]
        while len(path) == 1 or path[-1] != start:
            path.append(before[path[-1]])
        out.append(path[::-1])
    return out


def offending(prefix: str, banned: str) -> list[str]:
    """``file:line imports name`` for every import of ``banned`` (or below it) by a module under ``prefix``
    (``from studies import x``: ``studies.x`` only)."""
    out = []
    for module, path in sources().items():
        if module != prefix and not module.startswith(prefix + "."):
            continue
        found = [
            (line, name) for name, line in imported(path, module) if name == banned or name.startswith(banned + ".")
        ]
        for line, name in sorted(set(found)):
            if not any(other.startswith(name + ".") for at, other in found if at == line):
                out.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return out
