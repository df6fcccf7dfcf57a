"""studies/pretrained_syntax on made-up data: every number here is worked out by hand in the comments."""

import itertools
import json

import networkx as nx
import numpy as np
import pytest

from studies import pretrained_syntax as ps
from studies.attention_syntax import sister_offset_baseline, sister_pairs
from tests.conftest import ROOT

# pieces: 0 [CLS] | 1 a1, 2 a2 (word 0) | 3 b1, 4 b2 (word 1) | 5 [SEP]
WOP = [-1, 0, 0, 1, 1, -1]
A6 = np.array(
    [
        [0.5, 0.1, 0.1, 0.1, 0.1, 0.1],  # [CLS] row: not a word, ignored
        [0.1, 0.2, 0.1, 0.3, 0.2, 0.1],  # a1
        [0.3, 0.0, 0.1, 0.1, 0.1, 0.4],  # a2
        [0.0, 0.5, 0.1, 0.2, 0.1, 0.1],  # b1
        [0.2, 0.1, 0.1, 0.0, 0.4, 0.2],  # b2
        [0.1, 0.1, 0.1, 0.1, 0.1, 0.5],  # [SEP] row: ignored
    ]
)


def test_word_attention_by_hand():
    W, cls, sep = ps.word_attention(A6[None], WOP, 2)
    # from word 0 = mean over a1, a2 of the sum over the target word's pieces:
    #   to word 0: a1 0.2+0.1=0.3, a2 0.0+0.1=0.1 -> 0.2;   to word 1: a1 0.3+0.2=0.5, a2 0.1+0.1=0.2 -> 0.35
    # from word 1 (b1, b2): to word 0: 0.6, 0.2 -> 0.4;      to word 1: 0.3, 0.4 -> 0.35
    np.testing.assert_allclose(W[0], [[0.2, 0.35], [0.4, 0.35]], atol=1e-12)
    np.testing.assert_allclose(cls[0], [(0.1 + 0.3) / 2, (0.0 + 0.2) / 2], atol=1e-12)  # 0.2, 0.1
    np.testing.assert_allclose(sep[0], [(0.1 + 0.4) / 2, (0.1 + 0.2) / 2], atol=1e-12)  # 0.25, 0.15
    np.testing.assert_allclose(W[0].sum(1) + cls[0] + sep[0], 1.0)  # the rows keep their mass
    # [L, H, P, P] in, [L, H, W, W] out: each head converted on its own
    stack = np.stack([A6, np.roll(A6, 1, axis=1)])[None]  # (1, 2, 6, 6)
    W4, _, _ = ps.word_attention(stack, WOP, 2)
    assert W4.shape == (1, 2, 2, 2)
    np.testing.assert_allclose(W4[0, 0], W[0])
    np.testing.assert_allclose(W4[0, 1], ps.word_attention(np.roll(A6, 1, axis=1), WOP, 2)[0])


def test_word_attention_refuses_mismatched_pieces():
    with pytest.raises(ValueError, match="6 pieces"):
        ps.word_attention(np.ones((1, 5, 5)), WOP, 2)
    with pytest.raises(ValueError, match="every word 0..2"):
        ps.word_attention(A6, WOP, 3)  # word 2 has no piece


# a 3-word sentence: "the film rocks"-like: word 0 --det--> 1 (ROOT) <--dobj-- word 2
SENT = {"words": ["a", "b", "c"], "heads": [1, -1, 1], "deps": ["det", "ROOT", "dobj"]}
W_HEAD0 = np.array([[0.5, 0.4, 0.1], [0.2, 0.6, 0.2], [0.3, 0.6, 0.1]])
W_HEAD1 = np.array([[0.1, 0.1, 0.8], [0.8, 0.1, 0.1], [0.7, 0.2, 0.1]])


def test_predictions_both_directions():
    to_head, to_dep = ps.predictions(W_HEAD0)
    # row argmax without self: row 0 -> 1 (0.4 > 0.1), row 1 -> 0 (tie 0.2/0.2: leftmost), row 2 -> 1
    assert to_head.tolist() == [1, 0, 1]
    # column argmax without self: col 0: W[1,0]=0.2 < W[2,0]=0.3 -> 2; col 1: 0.4 < 0.6 -> 2; col 2: 0.1 < 0.2 -> 1
    assert to_dep.tolist() == [2, 2, 1]


def test_relation_tallies_by_hand():
    W = np.stack([W_HEAD0, W_HEAD1])[None]  # (1 layer, 2 heads, 3, 3)
    t = ps.relation_tallies([W], [SENT], offsets=[-1, 1, 2])
    assert set(t) == {"det", "dobj", ps.ALL}  # the root word is in no row
    # head 0: rows hit det (0 -> 1) and dobj (2 -> 1); columns: col 0 picks 2 (miss), col 2 picks 1 (hit)
    # head 1: rows pick 2 for word 0 and 0 for word 2 (both miss); col 0 picks 1 (0.8 > 0.7: hit), col 2 picks 0
    assert t["det"]["n"] == 1 and t["dobj"]["n"] == 1 and t[ps.ALL]["n"] == 2
    np.testing.assert_array_equal(t["det"]["to_head"], [[1, 0]])
    np.testing.assert_array_equal(t["det"]["to_dependent"], [[0, 1]])
    np.testing.assert_array_equal(t["dobj"]["to_head"], [[1, 0]])
    np.testing.assert_array_equal(t["dobj"]["to_dependent"], [[1, 0]])
    np.testing.assert_array_equal(t[ps.ALL]["to_dependent"], [[1, 1]])
    # offsets -1, +1, +2: det's head is at +1, dobj's at -1
    np.testing.assert_array_equal(t["det"]["offsets"], [0, 1, 0])
    np.testing.assert_array_equal(t["dobj"]["offsets"], [1, 0, 0])


def test_choose_on_uses_val_and_reports_test():
    val = {"a": 0.9, "b": 0.5, "c": 0.7}
    test = {"a": 0.6, "b": 0.95, "c": 0.8}  # test's best is b; the choice must stay a
    assert ps.choose_on(val, test) == ("a", 0.6, 0.9)
    assert ps.choose_on(val, lambda k: test[k]) == ("a", 0.6, 0.9)
    with pytest.raises(ValueError, match="not on test"):
        ps.choose_on(val, {"a": 0.1})


def _tally(n, grid, offsets):
    g = np.asarray(grid, dtype=float)
    return {"n": n, "to_head": g * n, "to_dependent": g[::-1] * n, "offsets": np.asarray(offsets, float) * n}


def test_relation_table_chooses_heads_and_offsets_on_val():
    offsets = [-1, 1]
    # val: head (1, 0) is best (layer 2, head 1 -> "2-1"), offset -1 is best
    # test: head (0, 1) would be best ("1-2"), offset +1 would be best
    val = {"det": _tally(200, [[0.1, 0.2], [0.9, 0.3]], [0.6, 0.4])}
    test = {"det": _tally(400, [[0.1, 0.95], [0.7, 0.3]], [0.3, 0.5])}
    row = ps.relation_table(val, test, min_n=100, offsets=offsets)["det"]
    assert (row["head"], row["acc"], row["to_head"]["val_acc"]) == ("2-1", pytest.approx(0.7), pytest.approx(0.9))
    assert (row["offset"], row["offset_acc"]) == (-1, pytest.approx(0.3))
    assert row["chosen_on"] == "val" and row["n"] == 400
    # tools.stats.compare, deterministic and unpaired: sqrt(0.7 * 0.3 / 400 * 2) = 0.0324, t(0.975, 399) = 1.966:
    # noise 0.0637; 0.7 - 0.3 beats it
    assert row["noise"] == pytest.approx(1.9659 * np.sqrt(0.21 / 400 * 2), rel=1e-4) and row["finds"]
    assert (row["rule"], row["verdict"], row["diff"]) == ("unpaired", "A higher", pytest.approx(0.4))
    # the to_dependent grid is the rows reversed: val best (0, 0)... [[0.9,0.3],[0.1,0.2]] -> "1-1", test 0.7
    assert (row["to_dependent"]["head"], row["to_dependent"]["acc"]) == ("1-1", pytest.approx(0.7))
    # too few test words: no row
    assert ps.relation_table(val, test, min_n=401, offsets=offsets) == {}


def test_a_head_is_judged_by_compare_on_two_deterministic_cells():
    from tools.stats import Cell, compare

    for acc, off, n in ((0.6, 0.4, 100), (0.54, 0.46, 100), (0.54, 0.46, 250), (0.4, 0.6, 10000), (0.7, 0.7, 50)):
        v = compare(Cell([acc], n=n, deterministic=True), Cell([off], n=n, deterministic=True))
        got = ps.judge(acc, off, n)
        assert got == {
            "diff": v.diff,
            "noise": v.noise,
            "verdict": v.verdict,
            "rule": "unpaired",
            "finds": v.verdict == "A higher",
        }
        assert ps.finds(acc, off, n) == (v.verdict == "A higher")
    # by hand, n = 100: sqrt((0.24 + 0.24) / 100) = 0.0693, t(0.975, 99) = 1.984: noise 0.137 < 0.2
    assert ps.judge(0.6, 0.4, 100)["noise"] == pytest.approx(1.9842 * np.sqrt(0.0048), rel=1e-4)
    assert ps.finds(0.6, 0.4, 100)
    assert not ps.finds(0.54, 0.46, 100)  # 0.08 < 0.14
    # n = 250: 0.08 beats the rule before (2 sqrt(0.25 / 250) = 0.063) but not this one, which counts each
    # accuracy's own binomial term: 1.970 sqrt(2 * 0.2484 / 250) = 0.088
    assert not ps.finds(0.54, 0.46, 250) and ps.judge(0.54, 0.46, 250)["noise"] == pytest.approx(0.0878, abs=2e-4)
    assert ps.finds(0.54, 0.46, 400)  # noise 0.069
    assert not ps.finds(0.4, 0.6, 10000)  # below the offset: never found, even where the rule sees "B higher"
    assert ps.judge(0.4, 0.6, 10000)["verdict"] == "B higher"


def test_each_row_of_the_page_is_the_rules_verdict_on_its_numbers():
    base = json.loads((ROOT / "docs" / "results" / "pretrained_syntax.json").read_text())
    stale = json.loads(json.dumps(base))
    for row in stale["relations"].values():  # a JSON written by the rule before: its verdicts are not trusted
        row.update(noise=0.0, finds=True, rule="before")
    md = ps.markdown([stale])
    assert md == ps.markdown([base])
    lines = md.splitlines()
    header = next(line for line in lines if line.startswith("| relation | n (test)")).split(" | ")
    for rel, row in base["relations"].items():
        cells = dict(zip(header, next(line for line in lines if line.startswith(f"| {rel} |")).split(" | ")))
        v = ps.judge(row["acc"], row["offset_acc"], row["n"])
        assert cells["noise"] == f"{100 * v['noise']:.1f}" and cells["rule"] == "unpaired", rel
        assert cells["finds"] == ("**yes**" if v["finds"] else "no"), rel
    assert "[docs/statistics.md](../statistics.md)" in md


def test_rejudge_writes_the_rules_verdicts_into_the_json(tmp_path, capsys):
    base = json.loads((ROOT / "docs" / "results" / "pretrained_syntax.json").read_text())
    for row in base["relations"].values():
        row.update(noise=0.0, finds=True)
    path = tmp_path / "ps.json"
    path.write_text(json.dumps(base))
    assert ps.main(["--rejudge", "--report", str(path), "--md", str(tmp_path / "ps.md")]) == 0
    got = json.loads(path.read_text())
    for row in got["relations"].values():
        assert {k: row[k] for k in ("diff", "noise", "verdict", "rule", "finds")} == ps.judge(
            row["acc"], row["offset_acc"], row["n"]
        )
    assert ps.main(["--rejudge"]) == 2 and "--report" in capsys.readouterr().err


def _brute_force(S):
    """The best single-root tree by trying every head assignment."""
    n, best = len(S), (-np.inf, None)
    for hs in itertools.product(range(-1, n), repeat=n):
        if hs.count(-1) != 1 or any(h == i for i, h in enumerate(hs)):
            continue
        if all(_reaches_root(hs, i) for i in range(n)):
            best = max(best, (sum(S[d, h] for d, h in enumerate(hs) if h >= 0), hs), key=lambda t: t[0])
    return best


def _reaches_root(hs, i):
    seen = set()
    while hs[i] != -1:
        if i in seen:
            return False
        seen.add(i)
        i = hs[i]
    return True


def _score(S, hs):
    return sum(S[d, h] for d, h in enumerate(hs) if h >= 0)


def test_max_arborescence_matches_brute_force_and_networkx():
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(1, 6))
        S = rng.random((n, n))
        hs = ps.max_arborescence(S)
        assert hs.count(-1) == 1 and all(_reaches_root(hs, i) for i in range(n)), hs
        best, _ = _brute_force(S)
        assert _score(S, hs) == pytest.approx(best)
    for _ in range(10):  # larger graphs, against networkx's Edmonds (any root, as here)
        n = int(rng.integers(6, 15))
        S = rng.random((n, n))
        G = nx.DiGraph()
        G.add_weighted_edges_from((h, d, S[d, h]) for d in range(n) for h in range(n) if h != d)
        T = nx.maximum_spanning_arborescence(G)
        assert _score(S, ps.max_arborescence(S)) == pytest.approx(T.size(weight="weight"))


def test_max_arborescence_recovers_a_planted_tree_and_its_root():
    rng = np.random.default_rng(1)
    gold = [2, 2, -1, 4, 2, 4]
    S = rng.random((6, 6)) * 0.1
    for d, h in enumerate(gold):
        if h >= 0:
            S[d, h] = 1.0
    assert ps.max_arborescence(S) == gold


def test_baseline_trees():
    assert ps.right_branching(4) == [-1, 0, 1, 2]
    assert ps.left_branching(4) == [1, 2, 3, -1]
    # gold 0 <- 1 -> 2 (root 1): right-branching finds 1 -> 2 (UAS: word 2), both undirected edges... only {0,1}
    # and {1,2} are gold; the chain has {0,1}, {1,2}: UUAS 2/2; UAS: word 2's head 1 is right, word 0's
    # head -1 and word 1's head 0 are wrong -> 1/3
    assert ps.attachment(ps.right_branching(3), [1, -1, 1]) == (1, 3, 2, 2)
    rng = np.random.default_rng(0)
    counts = {}
    for _ in range(3000):
        hs = ps.random_tree(3, rng)
        assert hs.count(-1) == 1 and all(_reaches_root(hs, i) for i in range(3))
        middle = next(v for v in range(3) if sum(v in (d, h) for d, h in enumerate(hs) if h >= 0) == 2)
        counts[middle] = counts.get(middle, 0) + 1
    # the 3 labelled trees on 3 nodes (which node is in the middle) are equally likely
    assert set(counts) == {0, 1, 2} and all(abs(c / 3000 - 1 / 3) < 0.04 for c in counts.values())
    assert ps.random_tree(7, np.random.default_rng(5)) == ps.random_tree(7, np.random.default_rng(5))


def test_sink_shares_by_hand():
    t = ps.sink_tallies(A6[None, None], WOP)  # 1 layer, 1 head; rows a1, a2, b1, b2
    s = ps.sink_shares(t)[0]
    assert s["layer"] == 1
    assert s["cls"] == pytest.approx((0.1 + 0.3 + 0.0 + 0.2) / 4)  # 0.15
    assert s["sep"] == pytest.approx((0.1 + 0.4 + 0.1 + 0.2) / 4)  # 0.2
    assert s["self"] == pytest.approx((0.2 + 0.1 + 0.2 + 0.4) / 4)  # 0.225
    assert s["other"] == pytest.approx(1 - 0.15 - 0.2 - 0.225)


def test_sister_tallies_by_hand():
    # (the (lovely film)): tokens 0-2, phrase 3 = (lovely film), root 4; sisters 0 -> {1, 2}, 1 -> {2}, 2 -> {1}
    sent = {"parent": [4, 3, 3, 4, -1]}
    W = np.array([[0.1, 0.5, 0.4], [0.3, 0.2, 0.5], [0.6, 0.3, 0.1]])[None, None]
    t = ps.sister_tallies([W], [sent], offsets=[-1, 1])
    assert t["n"] == 3
    # mass: 0.5 + 0.4, 0.5, 0.3 -> summed 1.7; most-attended other word: 1 (in), 2 (in), 0 (out) -> 2 hits
    assert t["mass"][0, 0] == pytest.approx(1.7) and t["hits"][0, 0] == 2
    assert t["uniform"] == pytest.approx(2 / 3 + 1 / 3 + 1 / 3)
    # offset -1: 0-1 out, 1-1=0 out, 2-1=1 in -> 1; offset +1: 1 in, 2 in, 3 out -> 2
    np.testing.assert_array_equal(t["offsets"], [1, 2])
    # the same definition as studies/attention_syntax: its best offset on this split is ours
    assert sister_offset_baseline([sister_pairs(sent["parent"], 3)])["sister"] == {"offset": 1, "acc": 2 / 3}


# ------------------------------------------------------------------------------------------------
# the driver, on a made-up treebank and a model with one planted syntax head
# ------------------------------------------------------------------------------------------------
def _right_branching_constituents(n):
    """Gold tree (w0 (w1 (w2 ...))): phrase n + k spans words k..n-1."""
    if n == 1:
        return [-1]
    parent = [n + min(i, n - 2) for i in range(n)] + [n + k - 1 for k in range(n - 1)]
    parent[n] = -1
    return parent


def _treebank(count, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in range(count):
        n = int(rng.integers(3, 9))
        heads = ps.random_tree(n, rng)
        deps = ["ROOT" if h < 0 else "det" if h == d + 1 else "nsubj" if h > d else "dobj" for d, h in enumerate(heads)]
        words = [f"s{seed}x{s}w{i}" + "long" * int(rng.integers(0, 2)) for i in range(n)]
        out.append({"words": words, "heads": heads, "deps": deps, "parent": _right_branching_constituents(n)})
    return out


def _planted_fn(sentences, layer=1, head=2, layers=2, heads=3):
    """Random attention everywhere except (layer, head): each piece attends 0.9 to its word's gold head
    (the root word to [SEP])."""
    gold = {tuple(s["words"]): s["heads"] for s in sentences}
    rand = ps.random_attention_fn(layers, heads)

    def fn(words):
        A, wop = rand(words)
        A = A.copy()
        wop_a = np.asarray(wop)
        for p, w in enumerate(wop):
            if w < 0:
                continue
            target = np.flatnonzero(wop_a == gold[tuple(words)][w]) if gold[tuple(words)][w] >= 0 else [len(wop) - 1]
            row = np.full(len(wop), 0.1 / (len(wop) - len(target)))
            row[target] = 0.9 / len(target)
            A[layer, head, p] = row
        return A, wop

    return fn


def test_analyse_finds_the_planted_head_and_tree():
    val, test = _treebank(40, 1), _treebank(60, 2)
    fn = _planted_fn(val + test)
    r = ps.analyse(fn, val, test, min_n=20, top_ks=(1, 2, 6), model="planted")
    json.dumps(r)  # the result is plain json
    assert r["chosen_on"] == "val" and r["layers"] == 2 and r["heads"] == 3
    rows = r["relations"]
    assert {"det", "nsubj", "dobj", ps.ALL} <= set(rows)
    for rel in ("det", "nsubj", "dobj", ps.ALL):
        row = rows[rel]
        assert {"n", "head", "acc", "offset", "offset_acc", "chosen_on", "noise", "finds"} <= set(row)
        assert row["head"] == "2-3" and row["acc"] == 1.0, (rel, row)
        assert row["finds"] == (rel != "det"), (rel, row)
    # det is "head at +1" by construction here: the offset scores 1.0 too, so the head does not find it
    assert rows["det"]["offset"] == 1 and rows["det"]["offset_acc"] == 1.0
    assert rows[ps.ALL]["n"] == sum(len(s["words"]) - 1 for s in test)
    trees = r["trees"]
    assert trees["best_head"]["head"] == "2-3" and trees["best_head"]["uas"] == 1.0
    assert trees["top_k"]["uuas"] == 1.0 and trees["top_k"]["k"] == 1
    assert 0 < trees["baselines"]["random"]["uuas"] < 0.7
    assert trees["baselines"]["right_branching"]["uuas"] == trees["baselines"]["left_branching"]["uuas"]
    # the planted head sends 0.9 of the root word's rows to [SEP]: layer 2's [SEP] share is above layer 1's
    sinks = r["attention_sinks"]
    assert [s["layer"] for s in sinks] == [1, 2] and sinks[1]["sep"] > sinks[0]["sep"]
    assert all(abs(s["cls"] + s["sep"] + s["self"] + s["other"] - 1) < 1e-9 for s in sinks)
    assert r["sister"]["chosen_on"] == "val" and 0 <= r["sister"]["mass"] <= 1
    report = ps.format_report(r)
    assert "| det |" in report and "2-3" in report


def test_plots_write_files(tmp_path):
    val, test = _treebank(12, 3), _treebank(12, 4)
    fn = _planted_fn(val + test)
    r = ps.analyse(fn, val, test, min_n=3, top_ks=(1,), tree_modes=("d2h",))
    assert ps.plot_relations(r, tmp_path / "bars.png").stat().st_size > 1000
    assert ps.plot_sentence(r, fn, test[0], tmp_path / "one.png").stat().st_size > 1000


def test_load_sst_matches_the_datasets_parse(tmp_path):
    from data.text import load_parser, parse_words

    (tmp_path / "dev.txt").write_text(
        "(3 (2 It) (4 (2 -LRB-) (3 (3 a) (3 (2 lovely) (2 film)))))\n(1 (2 Bad) (1 movie))\n"
    )
    nlp = load_parser()
    sents = ps.load_sst(tmp_path, "val", nlp=nlp)
    assert [s["words"] for s in sents] == [["It", "(", "a", "lovely", "film"], ["Bad", "movie"]]
    assert [s["heads"] for s in sents] == parse_words([s["words"] for s in sents], nlp, progress=False)
    assert all(len(s["deps"]) == len(s["words"]) and s["deps"].count("ROOT") == 1 for s in sents)
    assert sents[1]["parent"] == [2, 2, -1]
    with pytest.raises(ValueError, match="unknown split"):
        ps.load_sst(tmp_path, "train2", nlp=nlp)


def test_cli_refuses_an_unknown_model(capsys):
    assert ps.main(["--model", "bert-large", "--max-sentences", "2"]) == 2
    assert "unknown --model 'bert-large'; valid: minilm, random" in capsys.readouterr().err


def test_analyse_reports_the_val_choice_even_where_test_prefers_another_head():
    """Val's syntax head is 1-2, test's is 2-3: every row must name 1-2, with 1-2's (poor) test score."""
    val, test = _treebank(40, 5), _treebank(60, 6)
    on_val, on_test = _planted_fn(val, layer=0, head=1), _planted_fn(test, layer=1, head=2)
    val_words = {tuple(s["words"]) for s in val}
    r = ps.analyse(
        lambda w: on_val(w) if tuple(w) in val_words else on_test(w),
        val,
        test,
        min_n=20,
        top_ks=(1,),
        tree_modes=("d2h",),
    )
    for rel in ("nsubj", "dobj", ps.ALL):
        row = r["relations"][rel]
        assert row["head"] == "1-2" and row["to_head"]["val_acc"] == 1.0 and row["acc"] < 0.5, (rel, row)
    assert r["trees"]["best_head"]["head"] == "1-2" and r["trees"]["best_head"]["uas"] < 0.5
    assert r["trees"]["top_k"]["heads"] == ["1-2"]


# ------------------------------------------------------------------------------------------------
# the wired models: pretrained MiniLM, a train.py checkpoint
# ------------------------------------------------------------------------------------------------
TINY_SST = {  # two dev and two test trees (PTB-escaped, as the treebank's files are)
    "dev.txt": "(3 (2 It) (3 (2 is) (3 (2 a) (3 (3 lovely) (2 film)))))\n"
    "(1 (2 The) (1 (2 plot) (1 (2 makes) (1 (2 no) (2 sense)))))\n",
    "test.txt": "(3 (2 The) (3 (2 actors) (3 (2 give) (3 (2 a) (3 (3 fine) (2 performance))))))\n"
    "(1 (2 -LRB-) (1 (2 A) (1 (2 dull) (1 (2 unbelievably) (2 film)))))\n",
}


@pytest.fixture(scope="module")
def minilm_fn():
    return ps.MiniLMAttention()


def test_minilm_attention_batched_equals_one_by_one(minilm_fn):
    words = [["An", "unbelievably", "dull", "film", "."], ["Fine", "."], ["The", "cast", "is", "superb", "!"]]
    batched = minilm_fn.many(words)
    for ws, (A, wop) in zip(words, batched):
        p = minilm_fn.wordpiece.pieces(ws)
        assert wop == p.word and wop[0] == wop[-1] == -1 and A.shape == (6, 12, len(p), len(p))
        np.testing.assert_allclose(A.sum(-1), 1.0, atol=1e-5)  # softmax rows over real pieces only
        alone, _ = minilm_fn(ws)  # no padding in a batch of one: padding must not leak into the batch
        np.testing.assert_allclose(A, alone, atol=1e-5)
    assert len(batched[0][1]) > len(words[0]) + 2  # "unbelievably" is split: pieces, not words
    with pytest.raises(ValueError, match="have no piece"):
        minilm_fn(["fine", "\u200b"])  # a zero-width space gives WordPiece nothing


def test_minilm_cli_end_to_end(tmp_path):
    for name, text in TINY_SST.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "out"
    argv = ["--model", "minilm", "--data-dir", str(tmp_path), "--max-sentences", "3", "--min-n", "1"]
    argv += ["--out", str(out), "--md", str(out / "report.md")]
    assert ps.main(argv) == 0
    r = json.loads((out / "pretrained_syntax.json").read_text())
    assert r["chosen_on"] == "val" and r["reported_on"] == "test" and (r["layers"], r["heads"]) == (6, 12)
    assert r["sentences"] == {"val": 2, "test": 2} and r["command"].endswith(" ".join(argv))
    assert r["relations"][ps.ALL]["n"] == 6 + 5 - 2  # every test word but the two roots
    for rel, row in r["relations"].items():
        assert row["chosen_on"] == "val" and row["n"] >= 1, rel
        assert {"n", "head", "acc", "offset", "offset_acc", "noise", "finds"} <= set(row), rel
        layer, head = map(int, row["head"].split("-"))
        assert 1 <= layer <= 6 and 1 <= head <= 12 and 0 <= row["acc"] <= 1 and row["offset"] in ps.OFFSETS
    assert r["trees"]["chosen_on"] == "val" and r["trees"]["val_sentences"] == 2
    sinks = r["attention_sinks"]
    assert len(sinks) == 6 and all(abs(s["cls"] + s["sep"] + s["self"] + s["other"] - 1) < 1e-6 for s in sinks)
    assert all(s["cls"] > 0 and s["sep"] > 0 for s in sinks)  # a real BERT attends to both
    for png in ("pretrained_syntax_relations.png", "pretrained_syntax_example.png"):
        assert (out / png).stat().st_size > 1000
    md = (out / "report.md").read_text()
    assert "| all relations |" in md and "34.5 / 26.3" in md and ps.NOT_RUN in md


def _word_run(tmp_path=None):
    """A 2-layer, 2-head word-level Transformer as tools.common.Run would hold it (untrained, seeded)."""
    from types import SimpleNamespace

    import torch

    from data.graphs import make_construction
    from data.vocab import Vocab
    from models import build_model
    from tests.conftest import compose_config

    cfg = compose_config(["model=transformer", "model.num_layers=2", "model.num_heads=2", "model.hidden_dim=8"])
    vocab = Vocab.build([["the", "film", "is", "good"]])
    construction = make_construction({"name": "complete"}, vocab, cfg.model)
    torch.manual_seed(0)
    model = build_model(cfg.model, len(vocab), 5, construction).eval()
    config = {"model": {"name": "transformer"}, "graph": {"name": "complete"}, "dataset": {"lowercase": True}}
    return SimpleNamespace(model=model, vocab=vocab, construction=construction, config=config, path="tiny.pt")


def test_word_model_attention_is_the_edge_weights():
    import dgl
    import torch

    from studies.attention_syntax import record_attention

    run = _word_run()
    fn = ps.WordModelAttention(run)
    words = [["The", "film", "is", "good"], ["Good", "film"]]
    out = fn.many(words)
    for ws, (A, wop) in zip(words, out):
        assert wop == list(range(len(ws))) and A.shape == (2, 2, len(ws), len(ws))
        np.testing.assert_allclose(A.sum(-1), 1.0, atol=1e-6)  # the complete graph: rows over all words
        np.testing.assert_allclose(A, fn(ws)[0], atol=1e-6)  # batched == alone
    # by hand for sentence 0: the recorded weight of edge j -> i is A[layer, head, i, j]
    g = run.construction(run.vocab.encode(["the", "film", "is", "good"]), None, None)
    records = record_attention(run.model)
    records.clear()
    with torch.no_grad():
        run.model(dgl.batch([g]))
    src, dst = g.edges()
    for layer, attn in enumerate(records):
        for e in range(g.num_edges()):
            np.testing.assert_allclose(out[0][0][layer, :, dst[e], src[e]], attn[e].numpy(), atol=1e-6)
    # lower-cased as the dataset was: "The" and "the" are one token
    np.testing.assert_allclose(fn(["The", "film"])[0], fn(["the", "film"])[0])


def test_checkpoint_dispatch_names_what_cannot_load(tmp_path, capsys):
    from engine.checkpoint import save_checkpoint

    for name, expected in (("gcn", "model=gcn has no attention to analyse; valid: transformer, gat"),):
        path = tmp_path / f"{name}.pt"
        save_checkpoint(path, model={}, config={"model": {"name": name}}, vocab=[], num_classes=2, epoch=0)
        assert ps.main(["--checkpoint", str(path), "--max-sentences", "1"]) == 2
        err = capsys.readouterr().err
        assert expected in err and len(err.strip().splitlines()) == 1, err


def _minilm_checkpoint(path, graph):
    """A train.py-style model=minilm checkpoint: the pretrained encoder with block 0's query weights doubled."""
    import torch
    from omegaconf import OmegaConf

    import models
    from data.vocab import Vocab
    from engine.checkpoint import save_checkpoint
    from tests.conftest import compose_config

    cfg = compose_config(["model=minilm", f"graph={graph}", "dataset=sst_binary"])
    construction = models.make_construction(cfg.graph, Vocab.build([["x"]]), cfg.model)
    model = models.build_model(cfg.model, 1, 2, construction)
    with torch.no_grad():  # as if fine-tuned: block 0's queries changed
        model.blocks[0].attention.query.weight.mul_(2.0)
    config = OmegaConf.to_container(cfg, resolve=True)
    vocab = Vocab.build([["x"]]).to_list()
    save_checkpoint(path, model=model.state_dict(), config=config, vocab=vocab, num_classes=2, epoch=1)
    return path, model


def test_fine_tuned_minilm_checkpoint_loads_with_piece_level_attention(minilm_fn, tmp_path, capsys):
    """A model=minilm checkpoint is analysed with its own weights on the complete piece graph (not the
    pretrained ones); one fine-tuned on another graph is refused in one line."""
    path, model = _minilm_checkpoint(tmp_path / "complete.pt", "complete")
    fn = ps.checkpoint_attention_fn(path)
    assert getattr(fn, "fine_tuned", False) and "fine-tuned on sst_binary" in fn.name
    words = ["The", "film", "is", "unwatchable", "."]
    A, wop = fn(words)
    A_own, wop_own = ps.MiniLMAttention(model=model, wordpiece=minilm_fn.wordpiece)(words)
    A0, _ = minilm_fn(words)
    assert wop == wop_own and A.shape == (6, 12, len(wop), len(wop))
    np.testing.assert_allclose(A, A_own, atol=1e-6)  # the checkpoint's weights
    assert np.abs(A[0] - A0[0]).max() > 1e-3  # not the pretrained ones
    _minilm_checkpoint(tmp_path / "dep.pt", "dep")
    assert ps.main(["--checkpoint", str(tmp_path / "dep.pt"), "--max-sentences", "1"]) == 2
    err = capsys.readouterr().err
    assert "fine-tuned on graph=dep" in err and len(err.strip().splitlines()) == 1, err


def test_fine_tuned_json_fills_its_column():
    base = json.loads((ROOT / "docs" / "results" / "pretrained_syntax.json").read_text())
    tuned = {**base, "label": "fine-tuned MiniLM", "fine_tuned": True, "model": "all-MiniLM-L6-v2 fine-tuned"}
    md = ps.markdown([base, tuned])
    assert ps.NOT_RUN not in md and "Fine-tuned MiniLM: all-MiniLM-L6-v2 fine-tuned." in md
    header = next(line for line in md.splitlines() if line.startswith("| relation | Clark head"))
    assert header.count("|") == 6 and header.strip().endswith("fine-tuned MiniLM |")
    assert ps.NOT_RUN in ps.markdown([base])


def test_a_committed_page_is_not_drawn_from_an_analysis_saved_elsewhere(capsys):
    """--md under docs/results with the default --out (outputs/) would replace the committed page with a
    random model's analysis: refused with one line, before any model or data is loaded."""
    page = ps.Path(ps.__file__).resolve().parents[2] / "docs" / "results" / "pretrained_syntax.md"
    before = page.read_bytes()
    assert ps.main(["--md", str(page), "--data-dir", "/nonexistent"]) == 2  # unguarded: a data error instead
    assert "add --out docs/results" in capsys.readouterr().err
    assert page.read_bytes() == before
