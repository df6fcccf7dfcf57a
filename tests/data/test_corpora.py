"""data/corpora.py: the SST tree reader on hand-written trees, TREC and GLUE SST-2, their errors, and
the counts of the real files in ../shared/data when they are there."""

import pytest

from data.corpora import CorpusError, parse_ptb, read_glue_sst2, read_sst, read_trec
from data.graphs import tree_schedule
from tests.conftest import ROOT

SHARED = ROOT.parent / "shared" / "data"


def test_ptb_tree_hand_worked():
    # (3 (2 It) (4 (2 's) (3 lovely))): tokens 0 It, 1 's, 2 lovely; phrase 3 = ('s lovely), 4 = the root
    t = parse_ptb("(3 (2 It) (4 (2 's) (3 lovely)))")
    assert t["tokens"] == ["It", "'s", "lovely"]
    assert t["parent"] == [4, 3, 3, 4, -1]
    assert t["slot"] == [0, 0, 1, 1, -1]
    assert t["labels"] == [2, 2, 3, 4, 3]
    slot, height = tree_schedule(t["parent"], t["slot"])
    assert height == [0, 0, 0, 1, 2]


def test_ptb_tree_left_branching_and_spans():
    t = parse_ptb("(1 (0 (4 a) (3 b)) (2 c))")
    assert t["tokens"] == ["a", "b", "c"]
    assert t["parent"] == [3, 3, 4, 4, -1]  # phrase 3 = (a b), made before the root
    assert t["slot"] == [0, 1, 1, 0, -1]
    assert t["labels"] == [4, 3, 2, 0, 1]
    assert parse_ptb("(4 word)") == {"tokens": ["word"], "parent": [-1], "slot": [-1], "labels": [4]}


@pytest.mark.parametrize(
    "line, message",
    [
        ("(3 (2 It) (4 (2 's) (3 lovely))", r"col \d+: the tree ends before its '\)'"),
        ("(3 (2 It) (4 (2 's) (3 lovely))))", "text after the tree's last"),
        ("(7 (2 It) (2 is))", "label must be 0-4, found '7'"),
        ("(x (2 It) (2 is))", "label must be 0-4, found 'x'"),
        ("(3 (2 It) (2 is) (2 so))", "3 children; SST trees are binary"),
        ("(3 (2 ) (2 is))", "a leaf has no token"),
        ("3 (2 It)", "expected '\\(' to open a node"),
        ("(2 It is)", "expected '\\)' after the leaf's token"),
    ],
)
def test_ptb_errors(line, message):
    with pytest.raises(CorpusError, match=message):
        parse_ptb(line)


def test_sst_file_errors_name_file_and_line(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("(3 (2 It) (3 works))\n(3 (2 It) (9 fails))\n")
    with pytest.raises(CorpusError, match=r"train.txt:2: col 12: a node's label must be 0-4"):
        read_sst(path)
    with pytest.raises(CorpusError, match="set dataset.data_dir"):
        read_sst(tmp_path / "missing.txt")


def test_sst_binary_filter(tmp_path):
    path = tmp_path / "dev.txt"
    path.write_text("(3 (2 It) (4 works))\n(2 (2 It) (2 is))\n(1 (0 It) (2 fails))\n")
    trees = read_sst(path, binary=True)
    assert [t["label"] for t in trees] == [1, 0]  # the neutral sentence is dropped
    assert trees[0]["labels"] == [-1, 1, 1] and trees[1]["labels"] == [0, -1, 0]  # neutral phrases: no label


def test_trec_coarse_fine_and_latin1(tmp_path):
    path = tmp_path / "t.label"
    path.write_bytes("NUM:dist How far is it ?\nHUM:ind Who is Bj\xf6rk ?\nNUM:date When ?\n".encode("latin-1"))
    rows, names = read_trec(path)
    assert names == ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
    assert [r["label"] for r in rows] == [5, 3, 5]
    assert rows[1]["text"] == "Who is Bj\xf6rk ?"
    rows, names = read_trec(path, fine=True)
    assert names == ["HUM:ind", "NUM:date", "NUM:dist"] and [r["label"] for r in rows] == [2, 0, 1]
    path.write_text("NUM:dist How far ?\nWHAT:x Why ?\n")
    with pytest.raises(CorpusError, match=r"t.label:2: unknown TREC class 'WHAT:x'"):
        read_trec(path)


def test_glue_sst2(tmp_path):
    path = tmp_path / "dev.tsv"
    path.write_text("sentence\tlabel\nit 's good . \t1\nbad \t0\n")
    assert read_glue_sst2(path) == [{"text": "it 's good .", "label": 1}, {"text": "bad", "label": 0}]
    path.write_text("sentence\tlabel\nit 's good . \t2\n")
    with pytest.raises(CorpusError, match=r"dev.tsv:2: expected 'sentence<TAB>0\|1'"):
        read_glue_sst2(path)


needs_shared = pytest.mark.skipif(not (SHARED / "sst").is_dir(), reason=f"the local copies are not at {SHARED}")


@needs_shared
def test_real_files_have_the_published_counts():
    """Socher et al. (2013) / Tai et al. (2015): 8,544 / 1,101 / 2,210 sentences; binary 6,920 / 872 / 1,821."""
    counts = {s: (len(read_sst(SHARED / "sst" / f"{s}.txt")), len(read_sst(SHARED / "sst" / f"{s}.txt", True)))
              for s in ("train", "dev", "test")}  # fmt: skip
    assert counts == {"train": (8544, 6920), "dev": (1101, 872), "test": (2210, 1821)}
    rows, names = read_trec(SHARED / "trec" / "train_5500.label")
    assert len(rows) == 5452 and len(read_trec(SHARED / "trec" / "TREC_10.label")[0]) == 500
    assert any("\xf0" in r["text"] for r in rows)  # the one latin-1 byte
    assert len(read_trec(SHARED / "trec" / "train_5500.label", fine=True)[1]) == 50
    assert len(read_glue_sst2(SHARED / "sst2" / "dev.tsv")) == 872


@needs_shared
def test_every_sst_tree_is_a_binary_tree_over_its_tokens():
    for t in read_sst(SHARED / "sst" / "dev.txt"):
        n = len(t["tokens"])
        assert len(t["parent"]) == 2 * n - 1 and t["parent"].count(-1) == 1
        assert all(p >= n for p in t["parent"] if p >= 0)  # only phrases have children
        for phrase in range(n, 2 * n - 1):  # each phrase: a left and a right child
            assert sorted(t["slot"][i] for i, p in enumerate(t["parent"]) if p == phrase) == [0, 1]
