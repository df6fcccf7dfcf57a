"""The studies: one analysis each, written to one page under docs/results (see each folder's README.md).

A study whose table ``tools.check_docs`` replays from committed JSON lists it in a module-level ``REPLAYS``
(``[tools.replay.Table(table, (sources,), render, "studies.<name>.<function>")]``); ``replays`` collects them
for ``tools.replay`` (``pyproject.toml``'s ``[tool.tagnn] replays`` names it), so ``tools/`` names no study.
"""


def replays() -> list:
    """Every study's ``REPLAYS``, study by study in name order (each package of ``studies/`` is imported)."""
    import importlib
    import pkgutil

    out = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.ispkg:
            out += getattr(importlib.import_module(f"{__name__}.{info.name}"), "REPLAYS", [])
    return out


def checks() -> list:
    """Every study's ``CHECKS`` (callables taking the repository root, returning one line per problem), study by
    study in name order: what ``tools.check_docs`` runs beside the replayed tables."""
    import importlib
    import pkgutil

    out = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.ispkg:
            out += getattr(importlib.import_module(f"{__name__}.{info.name}"), "CHECKS", [])
    return out
