"""data/listops.py: values, tree heads, generation and the two TSV layouts.

Every expected value here is worked out by hand from the definitions (MAX, MIN, truncated
median, sum mod 10), not copied from a run of the code.
"""

from collections import Counter

import pytest

from data.listops import (
    END,
    OPERATORS,
    ListOpsError,
    binarised_string,
    generate,
    make_example,
    parse,
    read_tsv,
    tokenize,
    write_tsv,
)

# [MAX 2 [MIN 4 7 ] 0 ]   tokens by index:
#   0 [MAX   1 2   2 [MIN   3 4   4 7   5 ]   6 0   7 ]
# [MIN 4 7 ] = 4, so the root is MAX(2, 4, 0) = 4. [MAX heads 1, 2, 6, 7; [MIN heads 3, 4, 5.
NESTED = "[MAX 2 [MIN 4 7 ] 0 ]".split()
NESTED_HEADS = [-1, 0, 0, 2, 2, 2, 0, 0]


def toks(s: str) -> list[str]:
    return s.split()


def children_of(heads: list[int]) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for i, h in enumerate(heads):
        if h >= 0:
            kids.setdefault(h, []).append(i)
    return kids


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "expr, value",
    [
        ("[MAX 2 9 ]", 9),
        ("[MAX 3 1 0 2 ]", 3),
        ("[MIN 4 7 ]", 4),
        ("[MIN 8 5 9 6 ]", 5),
        ("[MED 5 1 3 ]", 3),  # odd count: the middle one of 1 3 5
        ("[MED 1 2 ]", 1),  # 1.5 truncated
        ("[MED 3 4 5 8 ]", 4),  # (4 + 5) / 2 = 4.5 truncated
        ("[MED 2 4 ]", 3),  # even count with a whole mean
        ("[MED 9 0 9 ]", 9),
        ("[SM 1 2 ]", 3),
        ("[SM 9 8 7 ]", 4),  # 24 mod 10
        ("[SM 5 5 ]", 0),  # 10 mod 10
        ("[SM 0 0 0 0 0 ]", 0),
    ],
)
def test_single_operator_values(expr, value):
    tokens = toks(expr)
    got, heads, depth = parse(tokens)
    assert got == value
    assert depth == 1
    assert heads == [-1] + [0] * (len(tokens) - 1)
    assert make_example(tokens)["label"] == value


@pytest.mark.parametrize(
    "expr, value, depth",
    [
        ("[MAX 2 [MIN 4 7 ] 0 ]", 4, 2),
        ("[MIN 9 [MAX 2 9 ] ]", 9, 2),
        ("[SM [SM 9 9 ] [SM 8 8 ] ]", 4, 2),  # 18%10=8, 16%10=6, 14%10=4
        ("[MED [MAX 1 5 ] [MIN 3 8 ] ]", 4, 2),  # median(5, 3) = 4
        ("[MAX [MIN [MED 1 2 3 ] 7 ] 0 ]", 2, 3),  # MED=2, MIN(2,7)=2, MAX(2,0)=2
        ("[SM 1 [MAX 2 [MIN 3 [MED 4 6 8 ] ] ] 9 ]", 3, 4),  # MED=6, MIN=3, MAX=3, 1+3+9=13
        ("[MIN [SM 1 1 ] [SM 2 2 ] [SM [MAX 3 3 ] 1 ] 5 ]", 2, 3),  # 2, 4, 4, 5 -> 2
    ],
)
def test_nested_values_and_depth(expr, value, depth):
    got_value, _, got_depth = parse(toks(expr))
    assert got_value == value
    assert got_depth == depth


def test_heads_and_depth_of_nested_example():
    value, heads, depth = parse(NESTED)
    assert value == 4
    assert heads == NESTED_HEADS
    assert depth == 2


def test_heads_of_deeper_example():
    #  0 [SM  1 [MAX  2 1  3 [MIN  4 3  5 4  6 ]  7 ]  8 9  9 ]
    tokens = toks("[SM [MAX 1 [MIN 3 4 ] ] 9 ]")
    value, heads, depth = parse(tokens)
    assert heads == [-1, 0, 1, 1, 3, 3, 3, 1, 0, 0]
    assert depth == 3
    assert value == (3 + 9) % 10


def test_closing_bracket_is_headed_by_its_operator():
    _, heads, _ = parse(NESTED)
    for i, tok in enumerate(NESTED):
        if tok == END:
            # the operator that owns this ']' is the nearest unclosed one before it
            assert NESTED[heads[i]] in OPERATORS
    assert heads[5] == 2  # the ']' of [MIN
    assert heads[7] == 0  # the ']' of [MAX


def test_make_example_fields():
    ex = make_example(NESTED, label=4)
    assert ex == {"tokens": NESTED, "label": 4, "heads": NESTED_HEADS, "depth": 2}
    assert ex["tokens"] is not NESTED  # a copy, not the caller's list
    assert make_example(NESTED)["label"] == 4


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "tokens, message",
    [
        ([], "empty expression"),
        (toks("[SM 1 FOO ]"), r"unknown token 'FOO' at position 2"),
        (toks("[SM 1 2 ] ]"), r"extra tokens after the root operator closed, at token 4"),
        (toks("] 1 2"), "must be a digit or start with an operator"),
        (toks("[SM 1 2"), r"1 operator\(s\) never closed"),
        (toks("[MAX 1 [SM 2 3 ]"), r"1 operator\(s\) never closed"),
        (toks("[MAX 1 [SM 2"), r"2 operator\(s\) never closed"),
        (toks("[SM ]"), r"operator \[SM closed at token 1 with no arguments"),
        (toks("[MAX 1 [MIN ] ]"), r"operator \[MIN closed at token 3 with no arguments"),
        (toks("5 5"), "must be a digit or start with an operator"),
        (toks("]"), "must be a digit or start with an operator"),
        (toks("[SM 1 2 ] 5"), "extra tokens after the root operator closed"),
        (toks("[ADD 1 2 ]"), "must be a digit or start with an operator"),
        (toks("[sm 1 2 ]"), "must be a digit or start with an operator"),
        (toks("[SM 1 12 ]"), r"unknown token '12'"),
    ],
)
def test_parse_errors(tokens, message):
    with pytest.raises(ListOpsError, match=message):
        parse(tokens)


def test_listops_error_is_a_value_error():
    with pytest.raises(ValueError):
        parse([])


def test_make_example_label_mismatch():
    with pytest.raises(ListOpsError, match="label 3 but the expression evaluates to 9"):
        make_example(toks("[MAX 2 9 ]"), label=3)
    # the right label passes
    assert make_example(toks("[MAX 2 9 ]"), label=9)["label"] == 9


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def big_sample():
    return list(generate(2000, seed=0, max_length=100))


def test_generate_is_deterministic():
    a = list(generate(50, seed=3, max_length=40))
    b = list(generate(50, seed=3, max_length=40))
    assert a == b
    c = list(generate(50, seed=4, max_length=40))
    assert [e["tokens"] for e in a] != [e["tokens"] for e in c]


def test_generate_count_and_uniqueness(big_sample):
    assert len(big_sample) == 2000
    assert len({tuple(e["tokens"]) for e in big_sample}) == 2000


def test_generate_zero():
    assert list(generate(0)) == []


@pytest.mark.parametrize("max_length, max_depth, max_args", [(100, 20, 5), (20, 3, 3), (12, 2, 4), (60, 6, 2)])
def test_generate_respects_limits(max_length, max_depth, max_args):
    examples = list(generate(200, seed=11, max_length=max_length, max_depth=max_depth, max_args=max_args))
    assert len(examples) == 200
    bare = [ex for ex in examples if len(ex["tokens"]) == 1]
    assert 1 <= len(bare) <= 10 and all(ex["depth"] == 0 and ex["heads"] == [-1] for ex in bare)
    for ex in examples:
        tokens, heads = ex["tokens"], ex["heads"]
        assert len(tokens) <= max_length
        assert (tokens[0] in OPERATORS or len(tokens) == 1) and heads[0] == -1
        assert heads.count(-1) == 1
        assert (1 if len(tokens) > 1 else 0) <= ex["depth"] <= max_depth
        kids = children_of(heads)
        for i, tok in enumerate(tokens):
            if tok in OPERATORS:
                # the children are the arguments followed by the operator's own ']'
                assert tokens[kids[i][-1]] == END
                assert 2 <= len(kids[i]) - 1 <= max_args
            else:
                assert i not in kids  # digits and ']' head nothing
        value, heads2, depth2 = parse(tokens)
        assert (ex["label"], heads, ex["depth"]) == (value, heads2, depth2)
        assert 0 <= ex["label"] <= 9


def test_generate_min_length():
    for ex in generate(100, seed=1, max_length=30, min_length=15):
        assert 15 <= len(ex["tokens"]) <= 30


def test_generate_labels_match_reparse(big_sample):
    for ex in big_sample:
        assert 0 <= ex["label"] <= 9
        assert make_example(ex["tokens"], ex["label"]) == ex


def test_generate_variety(big_sample):
    roots = Counter(e["tokens"][0] for e in big_sample)
    assert set(roots) == set(OPERATORS) | {str(d) for d in range(10)}  # all ten bare digits come early
    assert sum(roots[str(d)] for d in range(10)) == 10
    depths = {e["depth"] for e in big_sample}
    assert len(depths) > 1
    assert len({e["label"] for e in big_sample}) > 1
    assert max(len(e["tokens"]) for e in big_sample) <= 100


def test_generate_bad_arguments():
    with pytest.raises(ListOpsError, match="max_length >= 4"):
        list(generate(5, max_length=3, root_operator=True))
    with pytest.raises(ListOpsError, match="max_length >= 1"):
        list(generate(5, max_length=0))
    with pytest.raises(ListOpsError, match="num >= 0"):
        list(generate(-1))


def test_generate_gives_up_when_too_few_unique():
    # with 4 tokens only the 4 * 100 expressions "[OP d d ]" exist, and the 10 bare digits
    with pytest.raises(ListOpsError, match="could only make"):
        list(generate(411, seed=0, max_length=4, max_args=2))
    with pytest.raises(ListOpsError, match="could only make"):
        list(generate(401, seed=0, max_length=4, max_args=2, root_operator=True))
    assert len(list(generate(410, seed=0, max_length=4, max_args=2))) == 410


# --------------------------------------------------------------------------------------------
# Binarised strings and tokenising
# --------------------------------------------------------------------------------------------
def test_binarised_string_published_layout():
    assert binarised_string(toks("[MAX 2 9 ]")) == "( ( ( [MAX 2 ) 9 ) ] )"


def test_binarised_string_nested():
    inner = "( ( ( [MIN 4 ) 7 ) ] )"
    expected = f"( ( ( ( [MAX 2 ) {inner} ) 0 ) ] )"
    assert binarised_string(NESTED) == expected


def test_binarised_string_rejects_bad_expression():
    with pytest.raises(ListOpsError):
        binarised_string(toks("[MAX 2 9"))


def test_tokenize_drops_parentheses():
    assert tokenize("( ( ( [MAX 2 ) 9 ) ] )") == toks("[MAX 2 9 ]")
    assert tokenize("  [SM  1   2 ]  ") == ["[SM", "1", "2", "]"]
    assert tokenize(binarised_string(NESTED)) == NESTED


# --------------------------------------------------------------------------------------------
# TSV files
# --------------------------------------------------------------------------------------------
def _strip(examples):
    return [(e["tokens"], e["label"], e["heads"]) for e in examples]


@pytest.mark.parametrize("layout", ["listops", "lra"])
def test_tsv_round_trip(tmp_path, layout):
    examples = list(generate(60, seed=5, max_length=50))
    path = tmp_path / f"data-{layout}.tsv"
    write_tsv(examples, path, layout=layout)
    back = read_tsv(path)
    assert _strip(back) == _strip(examples)
    assert [e["depth"] for e in back] == [e["depth"] for e in examples]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no .tmp left behind


def test_write_tsv_line_layouts(tmp_path):
    examples = [make_example(toks("[MAX 2 9 ]"))]
    write_tsv(examples, tmp_path / "a.tsv", layout="listops")
    write_tsv(examples, tmp_path / "b.tsv", layout="lra")
    assert (tmp_path / "a.tsv").read_text() == "9\t( ( ( [MAX 2 ) 9 ) ] )\n"
    assert (tmp_path / "b.tsv").read_text() == "Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_write_tsv_unknown_layout(tmp_path):
    with pytest.raises(ListOpsError, match="unknown layout 'csv'"):
        write_tsv([], tmp_path / "x.tsv", layout="csv")
    assert not list(tmp_path.iterdir())


def test_write_tsv_failure_leaves_no_partial_file(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("old\n")
    bad = [make_example(toks("[SM 1 2 ]")), {"tokens": toks("[SM 1"), "label": 1}]
    with pytest.raises(ListOpsError):
        write_tsv(bad, path)
    assert path.read_text() == "old\n"  # the old file is untouched


def test_write_tsv_failure_leaves_no_tmp_file(tmp_path):
    bad = [make_example(toks("[SM 1 2 ]")), {"tokens": toks("[SM 1"), "label": 1}]
    with pytest.raises(ListOpsError):
        write_tsv(bad, tmp_path / "x.tsv")
    assert not list(tmp_path.glob("*.tmp"))  # the half-written temporary file is cleaned up


def test_read_hand_written_listops_file(tmp_path):
    path = tmp_path / "published.tsv"
    path.write_text(
        "7\t( ( ( [MAX 2 ) 7 ) ] )\n"
        "\n"  # blank lines are skipped
        "4\t( ( ( ( [MAX 2 ) ( ( ( [MIN 4 ) 7 ) ] ) ) 0 ) ] )\n"
        "4\t[SM 9 8 7 ]\n"  # parentheses are optional
    )
    examples = read_tsv(path)
    assert _strip(examples) == [
        (toks("[MAX 2 7 ]"), 7, [-1, 0, 0, 0]),
        (NESTED, 4, NESTED_HEADS),
        (toks("[SM 9 8 7 ]"), 4, [-1, 0, 0, 0, 0]),
    ]


def test_read_hand_written_lra_file(tmp_path):
    path = tmp_path / "lra.tsv"
    path.write_text("Source\tTarget\n[MED 3 4 5 8 ]\t4\n( ( ( [MIN 6 ) 3 ) ] )\t3\n")
    examples = read_tsv(path)
    assert _strip(examples) == [
        (toks("[MED 3 4 5 8 ]"), 4, [-1, 0, 0, 0, 0, 0]),
        (toks("[MIN 6 3 ]"), 3, [-1, 0, 0, 0]),
    ]


def test_read_tsv_max_length_allows_exact(tmp_path):
    path = tmp_path / "x.tsv"
    path.write_text("3\t[SM 1 2 ]\n")
    assert len(read_tsv(path, max_length=4)) == 1


@pytest.mark.parametrize(
    "content, message",
    [
        ("3\t[SM 1 2 ]\n3\t[SM 1 2 ]\textra\n", r":2: expected 2 tab-separated fields, found 3"),
        ("3 [SM 1 2 ]\n", r":1: expected 2 tab-separated fields, found 1"),
        ("3\t[SM 1 2 ]\nx\t[SM 1 2 ]\n", r":2: label 'x' is not an integer"),
        ("3\t[SM 1 2 ]\n\n3\t[SM 1 BAD ]\n", r":3: unknown token 'BAD'"),
        ("3\t[SM 1 2 ]\n5\t[SM 1 2 ]\n", r":2: label 5 but the expression evaluates to 3"),
        ("Source\tTarget\n[SM 1 2 ]\t3\n[SM 1 2 ]\tthree\n", r":3: label 'three' is not an integer"),
        ("Source\tTarget\n[SM 1 2 ]\t3\n3\t[SM 1 2 ]\n", r":3: label '\[SM 1 2 \]' is not an integer"),
        ("", "holds no examples"),
        ("\n\n", "holds no examples"),
        ("Source\tTarget\n", "holds no examples"),
    ],
)
def test_read_tsv_errors(tmp_path, content, message):
    path = tmp_path / "bad.tsv"
    path.write_text(content)
    with pytest.raises(ListOpsError, match=message) as info:
        read_tsv(path)
    assert str(path) in str(info.value)


def test_read_tsv_over_long_expression(tmp_path):
    path = tmp_path / "long.tsv"
    path.write_text("3\t[SM 1 2 ]\n4\t( ( ( ( [MAX 2 ) ( ( ( [MIN 4 ) 7 ) ] ) ) 0 ) ] )\n")
    with pytest.raises(ListOpsError, match=r":2: expression has 8 tokens, over dataset.max_length=7"):
        read_tsv(path, max_length=7)
    assert len(read_tsv(path, max_length=8)) == 2


def test_read_tsv_missing_file(tmp_path):
    with pytest.raises(ListOpsError, match="no such ListOps file"):
        read_tsv(tmp_path / "nope.tsv")
    (tmp_path / "dir.tsv").mkdir()
    with pytest.raises(ListOpsError, match="no such ListOps file"):
        read_tsv(tmp_path / "dir.tsv")


# --------------------------------------------------------------------------------------------
# The splits are i.i.d. samples of one pool
# --------------------------------------------------------------------------------------------
def _homogeneity_p(samples: list[list[int]], edges: list[int]) -> float:
    """Chi-square test that the samples share one distribution over the buckets [edges[i], edges[i+1])."""
    from scipy.stats import chi2_contingency

    table = [[sum(lo <= v < hi for v in s) for lo, hi in zip(edges, edges[1:])] for s in samples]
    return chi2_contingency(table)[1]


LENGTH_EDGES = [1, 2, 8, 14, 20, 30, 45, 70, 101]  # bare digits, then buckets of >= ~5% each
DEPTH_EDGES = [0, 1, 2, 3, 4, 5, 7, 99]


def test_splits_are_iid_in_length_and_depth():
    """Train, val and test have the same length and depth distributions: a chi-square test of
    homogeneity must not reject at 1%. The test has power: the unshuffled generation stream (the
    old splits) is rejected at p < 1e-4 between its first and last 1,000 expressions."""
    from data.splits import load_splits

    cfg = {"name": "listops", "num_train": 6000, "num_val": 1000, "num_test": 1000, "max_length": 100,
           "max_depth": 20, "p_operator": 0.25, "max_args": 5, "seed": 0, "root_operator": False,
           "shuffle": True}  # fmt: skip
    splits = load_splits(cfg, progress=False)
    lengths = [splits[s]["length"] for s in ("train", "val", "test")]
    depths = [splits[s]["depth"] for s in ("train", "val", "test")]
    assert _homogeneity_p(lengths, LENGTH_EDGES) > 0.01
    assert _homogeneity_p(depths, DEPTH_EDGES) > 0.01
    stream = list(generate(8000, seed=0))
    first, last = [len(e["tokens"]) for e in stream[:1000]], [len(e["tokens"]) for e in stream[-1000:]]
    assert _homogeneity_p([first, last], LENGTH_EDGES) < 1e-4
    assert sum(splits[s]["length"].count(1) for s in splits) == 10  # every bare digit, somewhere


def test_command_line_writes_a_published_layout_file_disjoint_from_a_pool(tmp_path):
    from data.listops import main

    out = tmp_path / "fresh.tsv"
    assert main(["--num", "200", "--seed", "9", "--max-length", "30", "--exclude-num", "500", "--out", str(out)]) == 0
    rows = read_tsv(out)
    assert len(rows) == 200 and "( (" in out.read_text()  # the published parentheses
    pool = {tuple(e["tokens"]) for e in generate(500, seed=0, max_length=30)}
    assert not any(tuple(r["tokens"]) in pool for r in rows)
    assert main(["--num", "200", "--seed", "9", "--max-length", "30", "--out", str(out)]) == 0
    assert any(tuple(r["tokens"]) in pool for r in read_tsv(out))  # without --exclude-num, short ones repeat


def test_an_old_checkpoints_config_gets_its_old_splits_back():
    """A config saved before bare digits and shuffling (no root_operator/shuffle keys) must rebuild the
    splits it was trained on, or evaluate.py would score it on examples it trained on."""
    from data.splits import load_splits

    old = {"name": "listops", "num_train": 300, "num_val": 50, "num_test": 50, "max_length": 40,
           "max_depth": 20, "p_operator": 0.25, "max_args": 5, "seed": 0}  # fmt: skip
    stream = [e["tokens"] for e in generate(400, seed=0, max_length=40, root_operator=True)]
    splits = load_splits(old, progress=False)
    assert splits["train"]["tokens"] == stream[:300] and splits["test"]["tokens"] == stream[350:]
    new = load_splits({**old, "root_operator": False, "shuffle": True}, progress=False)
    assert new["test"]["tokens"] != stream[350:]
    assert load_splits({**old, "root_operator": False}, progress=False)["test"]["tokens"] == new["test"]["tokens"]
