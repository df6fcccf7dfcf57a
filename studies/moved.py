"""Where the studies went when they left ``tools/`` (issue 34), and the rewrite of old references.

    python -m studies.moved                 # rewrite every old reference in the repository's text files
    python -m studies.moved --check         # list them, change nothing (exit 1 when there are any)
    python -m studies.moved README.md docs  # only these files or folders

A study was ``tools/<name>.py`` (``python -m tools.<name>``); it is the package ``studies/<name>/``
(``python -m studies.<name>``). Rewritten, in code, configs, docs and tutorials alike:

* ``tools.<name>`` (a module path: commands, imports, ``experiment_then:`` lines) -> ``studies.<name>``;
* ``from tools import <name>`` -> ``from studies import <name>`` (one name alone on the line);
* a markdown link to ``tools/<name>.py`` -> a link to the folder ``studies/<name>/`` (its README and code);
* ``tools/<name>.py`` anywhere else -> ``studies/<name>``.

Nothing else on a line changes, so it can be run again after merging a branch written before the move.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MOVED = {
    f"tools.{name}": f"studies.{name}"
    for name in (
        "attention_syntax",
        "essay",
        "graph_probe",
        "listops_best",
        "long_range",
        "pretrained_graphs",
        "pretrained_syntax",
        "prune_heads",
        "soft_syntax",
    )
}
_NAMES = "|".join(sorted(m.split(".", 1)[1] for m in MOVED))
RULES = [
    (re.compile(rf"(?<![\w.])tools\.({_NAMES})\b"), r"studies.\1"),
    (re.compile(rf"^(\s*)from tools import ({_NAMES})(\s+as\s+\w+)?[ \t]*$", re.M), r"\1from studies import \2\3"),
    (re.compile(rf"(\]\((?:\.\./)*)tools/({_NAMES})\.py\)"), r"\1studies/\2/)"),
    (re.compile(rf"(?<![\w-])(?<!tests/)tools/({_NAMES})\.py\b"), r"studies/\1"),
]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".jsonl", ".toml", ".txt", ".cfg", ".ini"}
SKIP = {".git", ".venv", "build", "outputs", "multirun", ".cache", "node_modules", "__pycache__"}


def rewrite(text: str) -> str:
    for pattern, replacement in RULES:
        text = pattern.sub(replacement, text)
    return text


def files(paths: list[Path]):
    for path in paths:
        if path.is_file():
            yield path
            continue
        for folder, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIP)
            for name in sorted(names):
                if Path(name).suffix in SUFFIXES or name == "Makefile":
                    yield Path(folder) / name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="files or folders (default: the repository)")
    parser.add_argument("--check", action="store_true", help="list the files with old references, change nothing")
    args = parser.parse_args(argv)
    stale = []
    for path in files(args.paths or [ROOT]):
        if path.resolve() == Path(__file__).resolve():
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite(text)
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new)
    for path in stale:
        print(f"{'has old study references' if args.check else 'rewrote'}: {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
