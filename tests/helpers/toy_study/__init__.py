"""A toy study for tests/engine/test_how_to_add.py, written as a new package of studies/ is:
``python -m studies.toy_study`` counts the edges of every registered graph on a sentence of n tokens and writes
``docs/results/toy_study.json`` and, from it, ``docs/results/toy_study.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from data.graphs import GRAPH_KINDS, GraphConstruction
from tools.replay import Table


def edges_per_graph(n: int) -> dict[str, int]:
    """The edges of an n-token chain-parsed sentence under every registered graph that builds it alone."""
    heads = [-1] + list(range(n - 1))
    return {name: GraphConstruction(name)(list(range(n)), heads).num_edges() for name in GRAPH_KINDS}


def table_from_json(data: dict) -> str:
    """The page, from the JSON alone."""
    rows = [f"| {name} | {count} |" for name, count in data["edges"].items()]
    return "\n".join([f"# Edges of a {data['n']}-token sentence", "", "| graph | edges |", "|---|---|", *rows, ""])


# the page tools.check_docs replays from the JSON (studies.replays collects it)
REPLAYS = [Table("docs/results/toy_study.md", ("docs/results/toy_study.json",), table_from_json, "table_from_json")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("docs/results"))
    args = parser.parse_args(argv)
    data = {"n": args.n, "edges": edges_per_graph(args.n)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "toy_study.json").write_text(json.dumps(data, indent=1) + "\n")
    (args.out / "toy_study.md").write_text(table_from_json(data))
    return 0
