"""Every graph construction builds exactly the graphs it built when this snapshot was taken (commit 9f2f680,
before data/graphs.py became the package data/graphs/), except the 28 lap_pe cases whose graph has a repeated
Laplacian eigenvalue (setting s5): their positions depended on the machine's LAPACK (17 differed between an
AMD and an Intel CPU) until data/graphs/positional.py gave such eigenspaces a fixed basis, and were written
again then, the same on both (checked with MKL_CBWR=COMPATIBLE, which reproduces the AMD path).

Each case builds one graph (every registered kind x settings x a few ListOps expressions and parsed sentences,
with SST-style gold trees), or one kNN rebuild, one word-level graph lifted to word pieces, one memory-plan count,
or one refusal. A graph is reduced to a record: ``exact``, a SHA-256 of everything that must match bit for bit
(its edges in order, the names, dtypes and shapes of its node and edge data, and the values of the integer and
boolean ones), and ``floats``, the values of its float data (positional encodings), kept as numbers and compared
within FLOAT_ATOL: another CPU's LAPACK or float32 kernels round them differently in the last bits, which a hash
of rounded floats turned into a failure (a value near a rounding boundary flips), while a changed encoding moves
them by far more. ``tests/fixtures/graph_snapshot.json`` holds the records, one case a line; a refactor that
changes any graph, any order of edges, any dtype, any positional value beyond rounding or any error message
fails here, naming the case.

    python -m tests.data.test_graph_snapshot   # write the fixture again (only when a change is meant)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dgl
import numpy as np
import pytest
import torch

from data.corpora import parse_ptb
from data.graphs import GraphConstruction
from data.listops import make_example, tokenize
from data.wordpiece import Pieces, piece_graph, word_edges
from models.dense import to_dense
from models.knn import rebuild, rebuild_dense

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "graph_snapshot.json"
KINDS = ("complete", "tree", "dep", "binary_tree", "window", "bpt", "knn", "none")  # every kind at the snapshot

LISTOPS = [
    "7",
    "[MAX 2 9 ]",
    "[MAX 2 [MIN 4 7 ] 0 ]",
    "[SM [MED 3 [MAX 1 8 ] 5 2 ] [MIN 6 [SM 4 4 9 ] ] 1 ]",
]
# (SST gold tree, a dependency parse of its words as spaCy would give one: heads, -1 at a root)
SENTENCES = [
    ("(3 (2 It) (4 (4 (2 is) (3 (3 a) (4 good))) (2 film)))", [1, -1, 4, 4, 1]),
    ("(2 (2 (1 No) (2 one)) (1 (2 goes) (2 .)))", [1, 2, -1, 2]),
    ("(3 (2 Fine) (2 .))", [-1, 0]),
    ("(2 (2 (2 Hi) (2 .)) (3 (2 Go) (2 home)))", [-1, 0, -1, 2]),  # two sentences: two roots
]
SETTINGS = [  # GraphConstruction keyword arguments
    {},
    {"self_loops": False},
    {"cls_id": 2},
    {"self_loops": False, "cls_id": 2},
    {"window": 1, "k": 2},
    {"pe": "lap_pe", "pe_dim": 4},
    {"pe": "lap_pe", "pe_dim": 3, "pe_graph": "chain"},
    {"pe": "random_walk_pe", "pe_dim": 5, "pe_graph": "graph"},
    {"pe": "random_walk_pe", "pe_dim": 2, "pe_graph": "chain", "cls_id": 2},
]


FLOAT_ATOL = 1e-5  # float32 rounding differs by ~1e-7; a changed encoding, edge or sign moves values by far more


def record(**parts) -> dict:
    """``{"exact": SHA-256 of every part but float values, "floats": {name: values}}`` (no "floats" if none)."""
    h, floats = hashlib.sha256(), {}
    for name, part in parts.items():
        h.update(name.encode())
        if isinstance(part, torch.Tensor):
            t = part.detach().cpu()
            h.update(f"{part.dtype}{tuple(part.shape)}".encode())
            if t.is_floating_point():
                floats[name] = [round(x, 7) for x in t.double().flatten().tolist()]
            else:
                h.update(t.contiguous().numpy().tobytes())
        else:
            h.update(repr(part).encode())
    return {"exact": h.hexdigest()[:16], **({"floats": floats} if floats else {})}


def graph_parts(g: dgl.DGLGraph, prefix: str = "") -> dict:
    """A graph's node count, edges (in order), node and edge data (by name), as parts of a ``record``."""
    src, dst = g.edges()
    parts = {f"{prefix}num_nodes": g.num_nodes(), f"{prefix}src": src, f"{prefix}dst": dst}
    parts.update({f"{prefix}n:{name}": g.ndata[name] for name in sorted(g.ndata)})
    parts.update({f"{prefix}e:{name}": g.edata[name] for name in sorted(g.edata)})
    return parts


def graph_record(g: dgl.DGLGraph) -> dict:
    return record(**graph_parts(g))


def attempt(make) -> dict | str:
    """The record (or the text) ``make()`` returns, or the refusal's type and message."""
    try:
        return make()
    except (ValueError, KeyError, IndexError) as error:
        return f"{type(error).__name__}: {error}"


def inputs():
    """(case name, token ids, heads, gold tree or None) for every sentence."""
    for i, expression in enumerate(LISTOPS):
        ex = make_example(tokenize(expression))
        yield f"listops{i}", [4 + j for j in range(len(ex["tokens"]))], ex["heads"], None
    for i, (ptb, heads) in enumerate(SENTENCES):
        tree = parse_ptb(ptb)
        ids = [10 + j for j in range(len(tree["tokens"]))]
        yield f"sst{i}", ids, heads, (tree["parent"], tree["slot"])
        yield f"dep{i}", ids, heads, None  # a text dataset without gold trees (TREC)
    yield "no_heads", [5, 6, 7], None, None
    yield "ternary_gold", [5, 6, 7], [-1, 0, 0], ([3, 3, 3, -1], [0, 1, 2, -1])  # a gold tree, not binary
    yield "short_heads", [5, 6, 7], [-1, 0], None
    yield "short_gold", [5, 6, 7, 8], [-1, 0, 0, 0], ([4, 4, -1], [0, 1, -1])


def construction_cases():
    for kind in KINDS:
        for s, settings in enumerate(SETTINGS):
            for name, ids, heads, tree in inputs():

                def make(kind=kind, settings=settings, ids=ids, heads=heads, tree=tree):
                    return graph_record(GraphConstruction(name=kind, **settings)(ids, heads, tree))

                yield f"{kind}/s{s}/{name}", make


def knn_cases():
    for settings in ({"k": 2}, {"k": 3, "self_loops": False}, {"k": 2, "cls_id": 2}):
        for lengths in ([6, 3], [9, 2, 5]):

            def make(settings=settings, lengths=lengths):
                con = GraphConstruction(name="knn", **settings)
                g = dgl.batch([con(list(range(3, 3 + n))) for n in lengths])
                gen = torch.Generator().manual_seed(sum(lengths))
                h = torch.randn(g.num_nodes(), 4, generator=gen)
                sparse = rebuild(con, g, h)
                dg = to_dense(g, "cpu", edge_types=True)
                tokens = dg.pad(g.ndata["pos"] >= 0)
                dense = rebuild_dense(con, dg, dg.pad(h), tokens, True)
                plain = rebuild_dense(con, dg, dg.pad(h), tokens, False)
                return record(
                    **graph_parts(g, "built."),
                    **graph_parts(sparse, "rebuilt."),
                    dense_adj=dense.adj,
                    dense_etype=dense.etype,
                    plain_adj=plain.adj,
                    plain_etype=plain.etype,
                )

            yield f"knn_rebuild/{settings}/{lengths}", make


def count_cases():
    for kind in KINDS:
        for settings in ({}, {"self_loops": False, "k": 2}):

            def make(kind=kind, settings=settings):
                con = GraphConstruction(name=kind, **settings)
                return repr(
                    [(n, con.num_nodes(n), con.edge_count(n), con.dynamic, con.dense_complete) for n in (1, 2, 7, 30)]
                )

            yield f"count/{kind}/{settings}", make


def piece_cases():
    """Word-level graphs lifted to word pieces (no tokenizer: a sentence's pieces written out)."""
    for kind in KINDS:
        for name, ids, heads, tree in inputs():
            n = len(ids)
            word = [-1] + [w for w in range(n) for _ in range(1 + w % 2)] + [-1]  # odd words: two pieces
            pieces = Pieces([101] + [200 + i for i in range(len(word) - 2)] + [102], word, n)
            parent = tree[0] if tree is not None else None

            def make(kind=kind, pieces=pieces, heads=heads, parent=parent):
                return graph_record(piece_graph(pieces, kind, heads, 1, 2, mask_id=103, parent=parent))

            def words(kind=kind, n=n, heads=heads, parent=parent):
                src, dst, extra, spans = word_edges(kind, n, heads, 2, 4, parent)
                return record(src=src, dst=dst, extra=extra, spans=spans)

            yield f"pieces/{kind}/{name}", make
            yield f"words/{kind}/{name}", words
        cut = Pieces([101, 200, 201, 202, 102], [-1, 0, 1, 1, -1], 5, truncated=4)  # words 2..4 lost their pieces
        parse = parse_ptb(SENTENCES[0][0])

        def truncated(kind=kind, cut=cut, parent=parse["parent"]):
            return graph_record(piece_graph(cut, kind, SENTENCES[0][1], 2, 4, mask_id=103, parent=parent))

        yield f"pieces/{kind}/truncated", truncated


def cases():
    yield from construction_cases()
    yield from knn_cases()
    yield from count_cases()
    yield from piece_cases()


def snapshot() -> dict[str, dict | str]:
    torch.manual_seed(0)
    return {name: attempt(make) for name, make in cases()}


def differs(want: dict | str, got: dict | str) -> str | None:
    """What about a case differs from its snapshot: exact parts bit for bit, float values within FLOAT_ATOL."""
    if isinstance(want, str) or isinstance(got, str):
        return None if got == want else f"{want!r} -> {got!r}"
    if got["exact"] != want["exact"]:
        return f"edges, integer data, names, dtypes or shapes: {want['exact']} -> {got['exact']}"
    floats, wanted = got.get("floats", {}), want.get("floats", {})
    if sorted(floats) != sorted(wanted):
        return f"float data {sorted(wanted)} -> {sorted(floats)}"
    for name, values in wanted.items():
        gap = np.abs(np.asarray(floats[name]) - np.asarray(values)).max(initial=0.0)
        if not np.allclose(floats[name], values, rtol=0, atol=FLOAT_ATOL):
            return f"{name} moved by up to {gap:.2g} (tolerance {FLOAT_ATOL:g})"
    return None


def test_every_graph_is_built_as_at_the_snapshot():
    want = json.loads(FIXTURE.read_text())
    got = snapshot()
    assert sorted(got) == sorted(want), "the cases changed: write the fixture again only if that was meant"
    changed = [f"{name}: {why}" for name in want if (why := differs(want[name], got[name]))]
    assert not changed, f"{len(changed)} of {len(want)} cases differ from the snapshot:\n" + "\n".join(changed[:20])


def test_the_snapshot_covers_graphs_and_refusals():
    want = json.loads(FIXTURE.read_text())
    refused = [v for v in want.values() if isinstance(v, str) and v.startswith("ValueError")]
    assert len(want) > 700 and 20 < len(refused) < len(want) / 2
    assert any("graph=dep needs a dependency parse" in v for v in refused)
    assert any("graph=binary_tree's phrase nodes already read" in v for v in refused)
    assert any("graph=binary_tree needs a binary gold tree" in v for v in refused)
    assert any("a gold tree of 3 nodes for a sentence of 4 tokens" in v for v in refused)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_still_registered(kind):
    GraphConstruction(name=kind)


if __name__ == "__main__":
    lines = [f" {json.dumps(name)}: {json.dumps(value)}" for name, value in sorted(snapshot().items())]
    FIXTURE.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one case a line
    print(f"wrote {FIXTURE}")
