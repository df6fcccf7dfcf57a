"""Sentence embeddings from the pretrained MiniLM run as a graph network, one per line of a text file.

    python -m tools.embed --model minilm --graph complete --in sentences.txt --out sentences.npy

writes a float32 array ``[lines, 384]``: each line's mean-pooled, L2-normalised embedding
(sentence-transformers' all-MiniLM-L6-v2 pooling; on ``--graph complete`` it is that model's own
embedding). ``--graph`` runs the same weights on another graph over the WordPiece tokens, lifted from
the words by ``data/wordpiece.py``'s rule: ``window`` (words at most ``--window`` apart), ``none``
(each word alone), ``bpt`` (BP-Transformer's binary partition, ``--bpt-k``), ``dep`` (spaCy's
dependency parse, as ``data/text.py`` parses). Words are the line's whitespace-separated words, or
spaCy's tokens for ``dep``. ``tree`` needs a gold tree, which a text file does not have: use ``dep``.

Bad input stops with one line naming the line number and nothing written: an empty line, bytes that
are not UTF-8. A line longer than 256 pieces ([CLS] and [SEP] included) is truncated, as
sentence-transformers does, and counted in the log. The array is written to a temporary file and
renamed, so ``--out`` is either the complete result or untouched.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

log = logging.getLogger("tools.embed")
MODELS = ("minilm",)  # the one pretrained model embed() builds


def graph_names() -> tuple[str, ...]:
    """The registered graphs that lift from words to pieces (``word_graph``) and need no gold tree: a text
    file has none (``tree`` on SST is gold)."""
    from data.graphs import GRAPH_KINDS

    return tuple(name for name, kind in GRAPH_KINDS.items() if kind.word_graph is not None and not kind.gold_tree)


class InputError(ValueError):
    """Bad input: one line for the user, nothing written."""


def read_lines(path: Path) -> list[str]:
    """The file's lines, decoded as UTF-8; an empty line or undecodable bytes is an InputError naming the line."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read --in {path}: {err.strerror}") from None
    lines = []
    for number, line in enumerate(raw.splitlines(), start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(
                f"{path} line {number}: byte 0x{line[err.start]:02x} at column {err.start + 1} is not UTF-8; "
                "re-encode the file as UTF-8"
            ) from None
        if not text.strip():
            raise InputError(f"{path} line {number} is empty: give one sentence per line (remove blank lines)")
        lines.append(text)
    if not lines:
        raise InputError(f"{path} has no lines to embed")
    return lines


def build_graphs(lines: list[str], graph: str, wordpiece, window: int = 2, bpt_k: int = 4):
    """One piece graph per line, and how many lines were truncated and pieces cut."""
    from data.graphs import GRAPH_KINDS
    from data.wordpiece import piece_graph

    if GRAPH_KINDS[graph].text_only:  # dep: spaCy's parse of the line
        from data.text import load_parser, parse_texts

        parsed = parse_texts(lines, load_parser(), progress=False)
        pieces = [wordpiece.pieces(tokens) for tokens, _ in parsed]
        heads = [h for _, h in parsed]
    else:
        pieces = [wordpiece.text(line) for line in lines]
        heads = [None] * len(lines)
    graphs = [
        piece_graph(p, graph, heads=h, window=window, bpt_k=bpt_k, mask_id=wordpiece.mask_id)
        for p, h in zip(pieces, heads)
    ]
    cut = [(number, p.truncated) for number, p in enumerate(pieces, start=1) if p.truncated]
    return graphs, cut


def embed(lines: list[str], graph: str = "complete", model=None, wordpiece=None, batch_size: int = 32, **graph_kw):
    """(lines, 384) float32 unit vectors."""
    import dgl
    import torch

    from models.minilm import build_minilm, load_wordpiece

    model = model if model is not None else build_minilm({"normalize": True}, None).eval()
    wordpiece = wordpiece if wordpiece is not None else load_wordpiece()
    graphs, cut = build_graphs(lines, graph, wordpiece, **graph_kw)
    if cut:
        shown = ", ".join(str(n) for n, _ in cut[:10]) + (" ..." if len(cut) > 10 else "")
        log.warning(
            "%d line(s) longer than %d pieces truncated (%d pieces cut), as sentence-transformers does: line %s",
            len(cut),
            wordpiece.max_pieces,
            sum(c for _, c in cut),
            shown,
        )
    out = []
    with torch.no_grad():
        for start in range(0, len(graphs), batch_size):
            out.append(model.sentence_embeddings(dgl.batch(graphs[start : start + batch_size])))
    return torch.cat(out).numpy().astype(np.float32)


def save_atomic(array: np.ndarray, path: Path) -> None:
    """np.save to a temporary file beside ``path``, then rename: never a partial file at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    from data.graphs import GRAPH_KINDS

    graphs = graph_names()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm", help=f"one of: {', '.join(MODELS)}")
    parser.add_argument("--graph", default="complete", help=f"one of: {', '.join(graphs)}")
    parser.add_argument("--in", dest="inp", required=True, type=Path, help="UTF-8 text, one sentence per line")
    parser.add_argument("--out", required=True, type=Path, help="the .npy file to write, float32 [lines, 384]")
    parser.add_argument("--window", type=int, default=2, help="--graph window: words at most this far apart")
    parser.add_argument("--bpt-k", type=int, default=4, help="--graph bpt: k nearest tokens and spans per level")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    try:
        if args.model not in MODELS:
            raise InputError(f"unknown --model {args.model!r}; valid: {', '.join(MODELS)}")
        kind = GRAPH_KINDS.get(args.graph)
        if kind is not None and kind.gold_tree and kind.word_graph is not None:
            raise InputError(
                f"--graph {args.graph} needs gold trees (SST's), which a text file does not have: use --graph dep"
            )
        if args.graph not in graphs:
            raise InputError(f"unknown --graph {args.graph!r}; valid: {', '.join(graphs)}")
        lines = read_lines(args.inp)
        array = embed(lines, args.graph, batch_size=args.batch_size, window=args.window, bpt_k=args.bpt_k)
    except (InputError, ModuleNotFoundError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    save_atomic(array, args.out)
    log.info("wrote %s: %d x %d float32 (graph=%s)", args.out, *array.shape, args.graph)
    return 0


if __name__ == "__main__":
    sys.exit(main())
