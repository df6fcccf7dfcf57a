"""data/graphs/ (who talks to whom), the kNN rebuild of models/knn.py, and data/vocab.py.

Edges are compared as Python sets of ``(src, dst)`` pairs; ``src -> dst`` means dst receives
a message from src. Expected edge sets are written out from the definitions.
"""

import dgl
import pytest
import torch

from data.graphs import (
    GRAPH_KINDS,
    GRAPHS,
    GraphConstruction,
    cls_edges,
    complete_edges,
    knn_edges,
    self_loop_edges,
    tree_edges,
    window_edges,
)
from data.vocab import CLS, PAD, PHRASE, SPECIALS, UNK, Vocab
from models.knn import rebuild

# heads of [MAX 2 [MIN 4 7 ] 0 ]  (0 [MAX, 1 2, 2 [MIN, 3 4, 4 7, 5 ], 6 0, 7 ])
HEADS = [-1, 0, 0, 2, 2, 2, 0, 0]
CHILD_PARENT = {(1, 0), (2, 0), (3, 2), (4, 2), (5, 2), (6, 0), (7, 0)}
TREE_NO_LOOPS = CHILD_PARENT | {(p, c) for c, p in CHILD_PARENT}


def pairs(edges) -> set[tuple[int, int]]:
    src, dst = edges
    assert src.shape == dst.shape
    return set(zip(src.tolist(), dst.tolist()))


def pair_list(edges) -> list[tuple[int, int]]:
    src, dst = edges
    return list(zip(src.tolist(), dst.tolist()))


def loops(n: int) -> set[tuple[int, int]]:
    return {(i, i) for i in range(n)}


# --------------------------------------------------------------------------------------------
# Edge lists of one sentence
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5])
def test_complete_edges(n):
    everything = {(i, j) for i in range(n) for j in range(n)}
    with_loops = pair_list(complete_edges(n, self_loops=True))
    assert len(with_loops) == n * n and set(with_loops) == everything
    without = pair_list(complete_edges(n, self_loops=False))
    assert len(without) == n * (n - 1) and set(without) == everything - loops(n)


def test_complete_edges_default_has_self_loops():
    assert pairs(complete_edges(3)) == {(i, j) for i in range(3) for j in range(3)}


def test_tree_edges():
    without = pair_list(tree_edges(HEADS, self_loops=False))
    assert len(without) == 14 and set(without) == TREE_NO_LOOPS
    with_loops = pair_list(tree_edges(HEADS, self_loops=True))
    assert len(with_loops) == 14 + 8 and set(with_loops) == TREE_NO_LOOPS | loops(8)


def test_tree_edges_root_not_first():
    # root is token 1: 0 and 2 hang below it
    assert pairs(tree_edges([1, -1, 1], self_loops=False)) == {(0, 1), (1, 0), (2, 1), (1, 2)}


def test_tree_edges_single_node():
    assert pairs(tree_edges([-1], self_loops=False)) == set()
    assert pairs(tree_edges([-1], self_loops=True)) == {(0, 0)}


@pytest.mark.parametrize("n, w", [(6, 0), (6, 1), (6, 2), (4, 10), (1, 3)])
def test_window_edges(n, w):
    expected = {(i, j) for i in range(n) for j in range(n) if abs(i - j) <= w}
    with_loops = pair_list(window_edges(n, w, self_loops=True))
    assert len(with_loops) == len(expected) and set(with_loops) == expected
    without = pair_list(window_edges(n, w, self_loops=False))
    assert len(without) == len(expected - loops(n)) and set(without) == expected - loops(n)


def test_window_edges_by_hand():
    assert pairs(window_edges(4, 1, self_loops=False)) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)}


@pytest.mark.parametrize("n", [1, 4])
def test_self_loop_edges(n):
    edges = pair_list(self_loop_edges(n))
    assert edges == [(i, i) for i in range(n)]


@pytest.mark.parametrize("n", [1, 3])
def test_cls_edges(n):
    both_ways = {(i, n) for i in range(n)} | {(n, i) for i in range(n)}
    without = pair_list(cls_edges(n, self_loops=False))
    assert len(without) == 2 * n and set(without) == both_ways
    with_loop = pair_list(cls_edges(n, self_loops=True))
    assert len(with_loop) == 2 * n + 1 and set(with_loop) == both_ways | {(n, n)}


# --------------------------------------------------------------------------------------------
# GraphConstruction: a DGLGraph per sentence
# --------------------------------------------------------------------------------------------
TOK = [10, 11, 12, 13, 14, 15, 16, 17]
N = len(TOK)


def expected_edges(name: str, self_loops: bool, window: int = 2) -> set[tuple[int, int]]:
    if name == "complete":
        e = {(i, j) for i in range(N) for j in range(N)}
        return e if self_loops else e - loops(N)
    if name in ("tree", "dep"):  # with only a tree over the tokens, tree and dep are the same graph
        return TREE_NO_LOOPS | (loops(N) if self_loops else set())
    if name == "window":
        e = {(i, j) for i in range(N) for j in range(N) if abs(i - j) <= window}
        return e if self_loops else e - loops(N)
    if name == "none":
        return loops(N)  # a bag of tokens always hears itself
    assert name == "knn"
    return set()  # edges come later, from rebuild()


def graph_pairs(g: dgl.DGLGraph) -> list[tuple[int, int]]:
    return pair_list(g.edges())


# binary_tree and bpt add phrase/span nodes: tests/models/test_recursive.py and tests/engine/test_long_range.py test those
TOKEN_GRAPHS = tuple(g for g in GRAPHS if not GRAPH_KINDS[g].adds_nodes)


@pytest.mark.parametrize("name", TOKEN_GRAPHS)
@pytest.mark.parametrize("self_loops", [True, False])
def test_construction_without_cls(name, self_loops):
    g = GraphConstruction(name=name, self_loops=self_loops, window=2, k=3)(TOK, HEADS)
    assert isinstance(g, dgl.DGLGraph)
    assert g.num_nodes() == N
    edges = graph_pairs(g)
    assert len(edges) == len(set(edges))  # no duplicate edges
    assert set(edges) == expected_edges(name, self_loops)
    assert g.ndata["tok"].tolist() == TOK
    assert g.ndata["pos"].tolist() == list(range(N))
    assert g.ndata["root"].tolist() == [True] + [False] * (N - 1)
    assert g.ndata["root"].dtype == torch.bool
    assert GraphConstruction(name=name).dynamic == (name == "knn")


@pytest.mark.parametrize("name", TOKEN_GRAPHS)
@pytest.mark.parametrize("self_loops", [True, False])
def test_construction_with_cls(name, self_loops):
    cls_id = 2
    g = GraphConstruction(name=name, self_loops=self_loops, window=2, cls_id=cls_id)(TOK, HEADS)
    assert g.num_nodes() == N + 1
    cls_part = {(i, N) for i in range(N)} | {(N, i) for i in range(N)} | ({(N, N)} if self_loops else set())
    edges = graph_pairs(g)
    assert len(edges) == len(set(edges))
    assert set(edges) == expected_edges(name, self_loops) | cls_part
    assert g.ndata["tok"].tolist() == TOK + [cls_id]
    assert g.ndata["pos"].tolist() == list(range(N)) + [-1]
    assert g.ndata["root"].tolist() == [True] + [False] * N


def test_construction_root_follows_heads():
    heads = [1, -1, 1]  # the root is token 1
    g = GraphConstruction(name="tree", cls_id=2)([5, 6, 7], heads)
    assert g.ndata["root"].tolist() == [False, True, False, False]
    # no heads: the root flag falls back to token 0
    g = GraphConstruction(name="window")([5, 6, 7])
    assert g.ndata["root"].tolist() == [True, False, False]


def test_window_setting_is_used():
    g = GraphConstruction(name="window", window=1, self_loops=False)([1, 2, 3, 4])
    assert set(graph_pairs(g)) == {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)}


def test_unknown_graph_name():
    with pytest.raises(ValueError, match="unknown graph 'star'") as info:
        GraphConstruction(name="star")
    for name in GRAPHS:
        assert name in str(info.value)


def test_tree_needs_heads():
    with pytest.raises(ValueError, match="graph=tree needs a tree"):
        GraphConstruction(name="tree")([1, 2, 3])
    with pytest.raises(ValueError, match="graph=tree needs a tree"):
        GraphConstruction(name="tree")([1, 2, 3], None)


# --------------------------------------------------------------------------------------------
# kNN
# --------------------------------------------------------------------------------------------
def test_knn_edges_obvious_neighbours():
    x = torch.tensor([[0.0], [1.0], [10.0], [11.0], [30.0]])
    # nearest other point: 0<-1, 1<-0, 2<-3, 3<-2, 4 (30) <- 3 (11); edges go neighbour -> point
    expected = {(1, 0), (0, 1), (3, 2), (2, 3), (3, 4)}
    without = pair_list(knn_edges(x, [5], k=1, self_loops=False))
    assert len(without) == 5 and set(without) == expected
    with_loops = pair_list(knn_edges(x, [5], k=1, self_loops=True))
    assert len(with_loops) == 10 and set(with_loops) == expected | loops(5)


def test_knn_edges_k2_by_hand():
    x = torch.tensor([[0.0], [1.0], [10.0], [11.0], [30.0]])
    # two nearest others: 0: {1 (1), 2 (10)}; 1: {0 (1), 2 (9)}; 2: {3 (1), 1 (9)};
    # 3: {2 (1), 1 (10)}; 4: {3 (19), 2 (20)}
    expected = {(1, 0), (2, 0), (0, 1), (2, 1), (3, 2), (1, 2), (2, 3), (1, 3), (3, 4), (2, 4)}
    assert pairs(knn_edges(x, [5], k=2, self_loops=False)) == expected


def test_knn_edges_segments():
    k = 2
    x = torch.tensor(
        [
            # segment A (5 points, large): as in test_knn_edges_k2_by_hand
            [0.0],
            [1.0],
            [10.0],
            [11.0],
            [30.0],
            # segment B (2 points <= k + 1: joined completely), far from A's points but close
            # to nothing in its own segment
            [0.4],
            [100.0],
            # segment C (4 points, large), near A's points 0 and 1: neighbours must not cross
            [0.2],
            [5.0],
            [6.0],
            [20.0],
            # segment D (1 point): nothing to join
            [0.1],
        ]
    )
    sizes = [5, 2, 4, 1]
    seg_a = {(1, 0), (2, 0), (0, 1), (2, 1), (3, 2), (1, 2), (2, 3), (1, 3), (3, 4), (2, 4)}
    seg_b = {(5, 6), (6, 5)}
    # C, offsets 7..10: 7 (0.2): {8 (4.8), 9 (5.8)}; 8 (5): {9 (1), 7 (4.8)};
    # 9 (6): {8 (1), 7 (5.8)}; 10 (20): {9 (14), 8 (15)}
    seg_c = {(8, 7), (9, 7), (9, 8), (7, 8), (8, 9), (7, 9), (9, 10), (8, 10)}
    expected = seg_a | seg_b | seg_c
    without = pair_list(knn_edges(x, sizes, k=k, self_loops=False))
    assert len(without) == len(expected) and set(without) == expected
    with_loops = pair_list(knn_edges(x, sizes, k=k, self_loops=True))
    assert len(with_loops) == len(expected) + 12 and set(with_loops) == expected | loops(12)


def test_knn_small_segment_only():
    x = torch.tensor([[0.0], [1.0], [2.0]])
    # 3 points with k = 2: every point has exactly 2 others, joined completely
    assert pairs(knn_edges(x, [3], k=2, self_loops=False)) == {(i, j) for i in range(3) for j in range(3) if i != j}
    assert pairs(knn_edges(x, [3], k=5, self_loops=True)) == {(i, j) for i in range(3) for j in range(3)}


def test_knn_in_degree_and_segments():
    torch.manual_seed(0)
    sizes, k = [10, 3, 17, 6], 4
    x = torch.randn(sum(sizes), 8)
    src, dst = knn_edges(x, sizes, k=k, self_loops=False)
    seg = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    assert torch.equal(seg[src], seg[dst])  # never across segments
    assert not (src == dst).any()
    in_deg = torch.bincount(dst, minlength=x.shape[0])
    start = 0
    for s in sizes:
        want = k if s > k + 1 else s - 1
        assert in_deg[start : start + s].tolist() == [want] * s
        start += s
    assert len(pair_list((src, dst))) == len(pairs((src, dst)))  # no duplicates
    # the choice is by distance: each point's k neighbours are its k nearest in the segment
    start = 0
    for s in sizes:
        if s > k + 1:
            d = torch.cdist(x[start : start + s], x[start : start + s])
            d.fill_diagonal_(float("inf"))
            for i in range(s):
                nearest = set((d[i].topk(k, largest=False).indices + start).tolist())
                got = set(src[dst == start + i].tolist())
                assert got == nearest
        start += s


def test_knn_edges_do_not_need_grad():
    x = torch.randn(7, 3, requires_grad=True)
    src, dst = knn_edges(x, [7], k=2)
    assert not src.requires_grad and src.dtype == torch.long


def _batch(construction, lengths):
    return dgl.batch([construction(list(range(3, 3 + n))) for n in lengths])


def test_knn_rebuild_without_cls():
    k = 2
    con = GraphConstruction(name="knn", k=k, self_loops=True)
    g = _batch(con, [6, 3])
    assert g.num_edges() == 0  # knn graphs start with no edges
    torch.manual_seed(1)
    h = torch.randn(g.num_nodes(), 5)
    g2 = rebuild(con, g, h)
    assert g2.num_nodes() == g.num_nodes() == 9
    src, dst = g2.edges()
    sentence = torch.tensor([0] * 6 + [1] * 3)
    assert torch.equal(sentence[src], sentence[dst])
    in_deg = torch.bincount(dst, minlength=9).tolist()
    # sentence 0: k neighbours + self; sentence 1 (3 <= k + 1 points): the 2 others + self
    assert in_deg == [k + 1] * 6 + [3] * 3
    assert loops(9) <= pairs((src, dst))


def test_knn_rebuild_with_cls():
    k, cls_id = 2, 2
    con = GraphConstruction(name="knn", k=k, self_loops=True, cls_id=cls_id)
    g = _batch(con, [6, 3])
    # sentence 0: tokens 0..5, cls 6; sentence 1: tokens 7..9, cls 10
    assert g.ndata["pos"].tolist() == [0, 1, 2, 3, 4, 5, -1, 0, 1, 2, -1]
    cls_part = {(i, 6) for i in range(6)} | {(6, i) for i in range(6)} | {(6, 6)}
    cls_part |= {(i, 10) for i in (7, 8, 9)} | {(10, i) for i in (7, 8, 9)} | {(10, 10)}
    assert pairs(g.edges()) == cls_part

    torch.manual_seed(2)
    h = torch.randn(g.num_nodes(), 4)
    # put each <cls> right on top of a token: a kNN over all nodes would pick it
    h[6] = h[0]
    h[10] = h[7]
    g2 = rebuild(con, g, h)
    assert g2.num_nodes() == 11
    edges = pairs(g2.edges())
    assert cls_part <= edges  # the <cls> edges are kept
    sentence = torch.tensor([0] * 7 + [1] * 4)
    src, dst = g2.edges()
    assert torch.equal(sentence[src], sentence[dst])
    knn_part = edges - cls_part
    tokens = {0, 1, 2, 3, 4, 5, 7, 8, 9}
    for s, d in knn_part:
        assert s in tokens and d in tokens  # <cls> is never a kNN neighbour
    in_deg = torch.bincount(dst, minlength=11).tolist()
    # a token: k neighbours (or the 2 others in the short sentence) + self + <cls>
    assert in_deg[:6] == [k + 2] * 6
    assert in_deg[7:10] == [4] * 3
    # <cls>: all its tokens + itself
    assert in_deg[6] == 7 and in_deg[10] == 4
    # the kNN part agrees with knn_edges on the tokens alone
    token_idx = torch.tensor(sorted(tokens))
    s, d = knn_edges(h[token_idx], [6, 3], k, self_loops=True)
    assert knn_part == {(token_idx[a].item(), token_idx[b].item()) for a, b in zip(s.tolist(), d.tolist())}


# --------------------------------------------------------------------------------------------
# Vocab
# --------------------------------------------------------------------------------------------
SENTENCES = [["b", "a", "c"], ["a", "b", "a"], ["d", "a"], ["c", "e", "b"]]
# counts: a 4, b 3, c 2, d 1, e 1


def test_vocab_build_order():
    v = Vocab.build(SENTENCES)
    assert v.to_list() == [PAD, UNK, CLS, PHRASE, "a", "b", "c", "d", "e"]  # d and e tie: alphabetical
    assert len(v) == 9
    assert (v.stoi[PAD], v.stoi[UNK], v.stoi[CLS], v.stoi[PHRASE]) == (0, 1, 2, 3)
    assert v.cls_id == 2 and v.phrase_id == 3


def test_vocab_saved_before_phrase_nodes_still_loads():
    old = Vocab([PAD, UNK, CLS, "a", "b"])  # a checkpoint's vocabulary from before <phrase>
    assert old.encode(["b", "a"]) == [4, 3]
    with pytest.raises(ValueError, match="predates graph=binary_tree"):
        _ = old.phrase_id


def test_vocab_min_freq():
    assert Vocab.build(SENTENCES, min_freq=2).to_list() == [PAD, UNK, CLS, PHRASE, "a", "b", "c"]
    assert Vocab.build(SENTENCES, min_freq=4).to_list() == [PAD, UNK, CLS, PHRASE, "a"]
    assert Vocab.build(SENTENCES, min_freq=5).to_list() == list(SPECIALS)


def test_vocab_specials_in_data_not_duplicated():
    v = Vocab.build([[UNK, "x", CLS, "x"]])
    assert v.to_list() == [PAD, UNK, CLS, PHRASE, "x"]


def test_vocab_encode_unknown():
    v = Vocab.build(SENTENCES)
    assert v.encode(["a", "e", "zzz", "b", ""]) == [4, 8, 1, 5, 1]
    assert v.encode([]) == []


def test_vocab_round_trip():
    v = Vocab.build(SENTENCES, min_freq=2)
    items = v.to_list()
    items.append("mutated")
    assert "mutated" not in v.to_list()  # to_list gives a copy
    w = Vocab(v.to_list())
    assert w == v
    assert w.encode(["c", "a", "q"]) == v.encode(["c", "a", "q"]) == [6, 4, 1]
    assert v != Vocab(list(SPECIALS) + ["a"])
    assert v != v.to_list()


@pytest.mark.parametrize("tokens", [["a", PAD, UNK, CLS], [PAD, CLS, UNK], [PAD, UNK], []])
def test_vocab_must_start_with_specials(tokens):
    with pytest.raises(ValueError, match="starts with"):
        Vocab(tokens)


def test_vocab_rejects_duplicates():
    with pytest.raises(ValueError, match="each token once"):
        Vocab(list(SPECIALS) + ["a", "a"])


# --------------------------------------------------------------------------------------------
# The registry: every fact a construction declares agrees with the graphs it builds
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", GRAPHS)
def test_registry_facts_match_the_graphs_built(name):
    kind = GRAPH_KINDS[name]
    for n in (1, 2, 5, 17):
        heads = [-1] + [i // 2 for i in range(n - 1)]  # a tree over the n tokens, rooted at token 0
        con = GraphConstruction(name=name, k=3)
        g = con(list(range(4, 4 + n)), heads)
        assert ("parent" in g.ndata) == kind.is_tree
        assert g.num_nodes() <= con.num_nodes(n)
        assert (g.num_nodes() > n) == (kind.adds_nodes and n > 1)
        if kind.dynamic:  # edges come from the model's features: count those
            h = torch.randn(n, 8)
            g = rebuild(con, dgl.batch([g]), h)
        if kind.edge_count is not None:  # the memory plan's estimate: exact for complete and knn, within 20%
            # otherwise (binary_tree's 5n undercounts its 6n - 5 edges, as the plan always has)
            assert g.num_edges() <= 1.2 * con.edge_count(n), (name, n)
            assert g.num_edges() == con.edge_count(n) or name not in ("complete", "knn") or n <= con.k + 1
        else:
            assert con.edge_count(n) == con(list(range(n)), [-1] + [0] * (n - 1)).num_edges()
    # a dynamic kind's graphs hold no edges of their own: the model makes them (models/knn.py)
    assert kind.dynamic == (con(list(range(4, 9)), [-1, 0, 0, 1, 1]).num_edges() == 0)


def test_one_place_refuses_an_unknown_graph():
    from data.graphs import make_construction
    from engine.config import check_config
    from tests.conftest import compose_config

    messages = []
    for make in (
        lambda: GraphConstruction(name="star"),
        lambda: make_construction({"name": "star"}, Vocab.build([["a"]]), {}),
        lambda: check_config(compose_config(["graph=complete", "graph.name=star"])),
    ):
        with pytest.raises(ValueError) as info:
            make()
        messages.append(str(info.value))
    assert len(set(messages)) == 1 and messages[0].startswith("unknown graph 'star'; valid graphs: complete, tree")
