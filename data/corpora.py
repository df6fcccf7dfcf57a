"""Readers for the original files of three sentence datasets (local copies in ``../shared/data``).

  sst     Stanford Sentiment Treebank (Socher et al., 2013), PTB-style trees, one sentence a line:
          ``(3 (2 It) (4 (2 's) (3 lovely)))``: every node has a sentiment label 0-4; a leaf is
          ``(label token)``; an inner node has two children (the treebank is binary).
  trec    TREC question classification (Li & Roth, 2002): ``DESC:manner How did ... ?`` per line,
          latin-1 (the training file holds one 0xF0 byte).
  sst2    GLUE SST-2: ``sentence<TAB>label`` with a header.

``read_sst`` keeps the gold constituency tree in the form the tree constructions use
(``data/graphs/``): the n tokens are nodes 0..n-1 and every inner (phrase) node is appended after
them, children before parents; ``parent[i]`` is -1 at the root, ``slot[i]`` 0 for a left child and 1
for a right child, ``labels[i]`` the sentiment of node i's span. A malformed line raises
:class:`CorpusError` naming the file, line and column.
"""

from __future__ import annotations

import os
from pathlib import Path

SST_LABELS = 5
TREC_COARSE = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


class CorpusError(ValueError):
    """A malformed dataset file; the message names the file and line and says what to fix."""


# --------------------------------------------------------------------------------------------
# SST: a small recursive-descent reader for PTB-style trees
# --------------------------------------------------------------------------------------------
def parse_ptb(line: str) -> dict:
    """``{"tokens", "parent", "slot", "labels"}`` of one tree; raises ``CorpusError("col N: ...")``."""
    tokens: list[str] = []
    labels: list[int] = []  # the tokens' labels; the phrases' are added at the end
    pending: list[tuple[int, list]] = []  # (label, children) of phrases, numbered after the tokens at the end
    i, n = 0, len(line)

    def fail(msg: str):
        raise CorpusError(f"col {i + 1}: {msg}")

    def skip():
        nonlocal i
        while i < n and line[i] == " ":
            i += 1

    def node():
        """Parse one ``(label ...)`` at i; return ("tok", index) or ("phrase", index into pending)."""
        nonlocal i
        skip()
        if i >= n or line[i] != "(":
            fail("expected '(' to open a node")
        i += 1
        start = i
        while i < n and line[i] not in " ()":
            i += 1
        label_s = line[start:i]
        if not label_s.isdigit() or int(label_s) >= SST_LABELS:
            i = start
            fail(f"a node's label must be 0-{SST_LABELS - 1}, found {label_s!r}")
        label = int(label_s)
        skip()
        if i < n and line[i] == "(":  # an inner node: children until ')'
            children = []
            while True:
                skip()
                if i < n and line[i] == ")":
                    break
                if i >= n:
                    fail("the tree ends before its ')' (unbalanced parentheses)")
                children.append(node())
            i += 1
            if len(children) != 2:
                fail(f"an inner node has {len(children)} children; SST trees are binary")
            pending.append((label, children))
            return ("phrase", len(pending) - 1)
        start = i  # a leaf: one token, then ')'
        while i < n and line[i] not in " ()":
            i += 1
        if i == start:
            fail("a leaf has no token")
        token = line[start:i]
        skip()
        if i >= n or line[i] != ")":
            fail("expected ')' after the leaf's token")
        i += 1
        tokens.append(token)
        labels.append(label)
        return ("tok", len(tokens) - 1)

    root = node()
    skip()
    if i != n:
        fail("text after the tree's last ')'")
    num_tokens = len(tokens)

    def node_id(ref) -> int:
        kind, k = ref
        return k if kind == "tok" else num_tokens + k

    parent = [-1] * (num_tokens + len(pending))
    slot = [-1] * len(parent)
    labels = labels + [label for label, _ in pending]
    for k, (_, children) in enumerate(pending):  # pending is in post-order: children before parents
        for s, child in enumerate(children):
            parent[node_id(child)], slot[node_id(child)] = num_tokens + k, s
    assert parent[node_id(root)] == -1
    return {"tokens": tokens, "parent": parent, "slot": slot, "labels": labels}


def read_sst(path: str | os.PathLike, binary: bool = False) -> list[dict]:
    """Every tree of an SST file: ``{"tokens", "parent", "slot", "labels", "label"}``, ``label`` the root's.

    ``binary``: the SST-2 setting of Tai et al. (2015): sentences whose root is neutral (2) are
    dropped and labels become 0 (0-1, negative) or 1 (3-4, positive), on every node; neutral
    phrases keep -1 (no phrase label).
    """
    path = Path(path)
    if not path.is_file():
        raise CorpusError(
            f"no such SST file: {path} (set dataset.data_dir to the folder holding train.txt, dev.txt, test.txt)"
        )
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            line = line.strip()
            if not line:
                continue
            try:
                tree = parse_ptb(line)
            except CorpusError as e:
                raise CorpusError(f"{path}:{lineno}: {e}") from None
            tree["label"] = tree["labels"][tree["parent"].index(-1)]
            if binary:
                if tree["label"] == 2:
                    continue
                tree["labels"] = [-1 if y == 2 else int(y > 2) for y in tree["labels"]]
                tree["label"] = int(tree["label"] > 2)
            out.append(tree)
    if not out:
        raise CorpusError(f"{path} holds no trees")
    return out


# --------------------------------------------------------------------------------------------
# TREC and GLUE SST-2
# --------------------------------------------------------------------------------------------
def read_trec(
    path: str | os.PathLike,
    fine: bool = False,
    names: list[str] | None = None,
    extra_names_from: str | os.PathLike | None = None,
) -> tuple[list[dict], list[str]]:
    """``([{"text", "label"}], class names)`` of a TREC file (latin-1, as the files are).

    Coarse: the 6 classes. ``fine``: the ``COARSE:fine`` pairs, numbered in sorted order over this file
    (and ``extra_names_from``, so a train and a test file can share one numbering), or as ``names``
    gives them; a class outside ``names`` is an error naming the line."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"no such TREC file: {path} (set dataset.data_dir to the folder holding the .label files)")
    rows = []
    with open(path, encoding="latin-1") as f:
        for lineno, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            label, _, text = line.partition(" ")
            coarse, colon, _ = label.partition(":")
            if not colon or coarse not in TREC_COARSE:
                raise CorpusError(
                    f"{path}:{lineno}: unknown TREC class {label!r}; a line starts with COARSE:fine, "
                    f"COARSE one of {', '.join(TREC_COARSE)}"
                )
            if not text.strip():
                raise CorpusError(f"{path}:{lineno}: the question after {label!r} is empty")
            rows.append({"text": text.strip(), "label": label if fine else coarse, "line": lineno})
    if names is None:
        seen = {r["label"] for r in rows}
        if fine and extra_names_from is not None:
            seen |= set(read_trec(extra_names_from, fine=True)[1])
        names = sorted(seen) if fine else list(TREC_COARSE)
    index = {name: k for k, name in enumerate(names)}
    for r in rows:
        if r["label"] not in index:
            raise CorpusError(f"{path}:{r['line']}: TREC class {r['label']!r} is not one of the {len(names)} classes")
    return [{"text": r["text"], "label": index[r["label"]]} for r in rows], list(names)


def read_glue_sst2(path: str | os.PathLike) -> list[dict]:
    """``[{"text", "label"}]`` of a GLUE SST-2 TSV (``sentence<TAB>label`` and a header)."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"no such SST-2 file: {path} (set dataset.data_dir to the folder holding train.tsv, dev.tsv)")
    rows = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\r\n").split("\t")
        if header != ["sentence", "label"]:
            raise CorpusError(f"{path}:1: expected the header 'sentence<TAB>label', found {header!r}")
        for lineno, line in enumerate(f, start=2):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != 2 or fields[1] not in ("0", "1"):
                raise CorpusError(f"{path}:{lineno}: expected 'sentence<TAB>0|1', found {line.strip()[:60]!r}")
            rows.append({"text": fields[0].strip(), "label": int(fields[1])})
    return rows
