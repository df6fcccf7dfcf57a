"""Phrase-level training (``dataset.train_phrases``): every labelled phrase of SST's training trees becomes
its own example, cut from its sentence by ``data.text.phrase_rows``. Worked by hand on the trees of
tests/data/test_real_sentences.py."""

import pytest

from data.text import _fingerprint, load_parser, load_text_splits, phrase_rows
from tests.data.test_real_sentences import GOLD, sst_cfg, treebank  # noqa: F401  (treebank: a fixture)


def rows_of(gold, heads):
    return [{**g, "heads": h, "depth": 0, "length": len(g["tokens"])} for g, h in zip(gold, heads)]


# heads by hand (not spaCy's): each phrase's parse is its sentence's, cut to the phrase
HEADS = [[1, 3, 1, -1, 3], [1, -1, 1], [-1], [1, 3, 3, -1]]


def test_every_labelled_phrase_once_with_its_subtree():
    out = phrase_rows(rows_of(GOLD, HEADS))
    by_text = {" ".join(r["tokens"]): r for r in out}
    # 9 phrases of the first tree, 5 of the second, none new in "good" (seen in the first), 7 of the last
    assert len(out) == 21 == len(by_text)
    assert [r["tokens"] for r in out[:3]] == [["("], ["good"], [")"]]  # the sentence's order, words first
    inner = by_text["( good )"]
    assert inner["label"] == 3 and inner["length"] == 3
    assert inner["parent"] == [4, 3, 3, 4, -1] and inner["slot"] == [0, 0, 1, 1, -1]
    assert inner["node_labels"] == [2, 3, 2, 3, 3]
    assert inner["heads"] == [1, -1, 1]  # "fun" (outside) was the head of "good": "good" becomes a root
    right = by_text["fun ."]
    assert right["parent"] == [2, 2, -1] and right["slot"] == [0, 1, -1] and right["node_labels"] == [4, 2, 4]
    assert right["heads"] == [-1, 0] and right["depth"] == 2
    assert by_text["awful film"]["heads"] == [1, -1] and by_text["awful film"]["label"] == 0
    whole = by_text["a bad awful film"]
    assert {k: whole[k] for k in GOLD[3]} == GOLD[3] and whole["heads"] == HEADS[3]  # a sentence is its own phrase


def test_binary_labels_skip_neutral_phrases():
    binary = [{**g, "node_labels": [-1 if y == 2 else int(y > 2) for y in g["node_labels"]]} for g in GOLD]
    binary = [{**b, "label": b["node_labels"][-1]} for b in binary]
    out = phrase_rows(rows_of([binary[0], binary[2], binary[3]], [HEADS[0], HEADS[2], HEADS[3]]))
    assert [" ".join(r["tokens"]) for r in out] == [
        "good", "fun", "good )", "( good )", "fun .", "( good ) fun .",
        "bad", "awful", "a bad", "awful film", "a bad awful film",
    ]  # fmt: skip
    assert all(r["label"] in (0, 1) for r in out)


def test_train_phrases_loads_phrases_for_training_only(treebank):  # noqa: F811
    plain = load_text_splits(sst_cfg(treebank).dataset, progress=False)
    phrases = load_text_splits(sst_cfg(treebank, "dataset.train_phrases=true").dataset, progress=False)
    assert len(plain["train"]) == 4 and len(phrases["train"]) == 21
    for split in ("val", "test"):
        assert phrases[split]["tokens"] == plain[split]["tokens"]
    for row in phrases["train"]:  # every phrase's parse is its sentence's, cut to its span
        sentence = next(s for s in plain["train"] if _span(s["tokens"], row["tokens"]) is not None)
        a = _span(sentence["tokens"], row["tokens"])
        cut = [h - a if a <= h < a + row["length"] else -1 for h in sentence["heads"][a : a + row["length"]]]
        assert row["heads"] == cut


def test_cache_keys_of_earlier_runs_stay():
    nlp = load_parser()
    cfg = dict(sst_cfg_dict := {"name": "sst", "data_dir": None, "lowercase": True, "seed": 0})
    assert _fingerprint(cfg, nlp) == _fingerprint({**sst_cfg_dict, "train_phrases": False}, nlp)
    assert _fingerprint(cfg, nlp) != _fingerprint({**sst_cfg_dict, "train_phrases": True}, nlp)


def _span(tokens, part):
    for a in range(len(tokens) - len(part) + 1):
        if tokens[a : a + len(part)] == part:
            return a
    return None


@pytest.mark.parametrize("name", ["trec", "sst2", "text_files"])
def test_train_phrases_is_refused_where_there_are_no_trees(name):
    with pytest.raises(ValueError, match=rf"dataset={name} has none: use dataset=sst or dataset=sst_binary"):
        load_text_splits({"name": name, "train_phrases": True}, progress=False)
