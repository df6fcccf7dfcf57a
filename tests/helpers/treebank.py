"""A small sentiment treebank in SST's format (train/dev/test.txt of labelled binary trees), written by a test.

Each sentence is a review line whose sentiment is carried by its adjective phrase ("the plot was really
wonderful", "i found the acting dull"); the label of every phrase is set, as SST's are, so dataset=sst and
dataset=sst_binary both read it. Seeded: the same files every time.
"""

from __future__ import annotations

import random
from pathlib import Path

NOUNS = ["movie", "film", "plot", "story", "acting", "cast", "script", "ending", "soundtrack", "dialogue"]
GOOD = ["great", "wonderful", "good", "excellent", "lovely", "superb", "charming", "moving", "brilliant", "fun"]
BAD = ["awful", "terrible", "bad", "boring", "dreadful", "dull", "tedious", "weak", "clumsy", "unwatchable"]
ADVERBS = ["", "really", "quite", "truly", "so"]


def _leaf(word: str, y: int = 2) -> str:
    return f"({y} {word})"


def _adj_phrase(adverb: str, adj: str, y: int) -> str:
    return f"({y} {_leaf(adverb)} {_leaf(adj, y)})" if adverb else _leaf(adj, y)


def sentence_tree(rng: random.Random, positive: bool) -> str:
    """One labelled binary tree: 4 (very positive) or 0 (very negative) at the root and along the adjective."""
    y = 4 if positive else 0
    noun, adj, adverb = rng.choice(NOUNS), rng.choice(GOOD if positive else BAD), rng.choice(ADVERBS)
    adjp = _adj_phrase(adverb, adj, y)
    if rng.random() < 0.5:  # "the NOUN was [ADV] ADJ"
        return f"({y} (2 {_leaf('the')} {_leaf(noun)}) ({y} {_leaf('was')} {adjp}))"
    # "i found the NOUN [ADV] ADJ"
    return f"({y} {_leaf('i')} ({y} {_leaf('found')} ({y} (2 {_leaf('the')} {_leaf(noun)}) {adjp})))"


def write_treebank(folder: Path, train: int = 200, dev: int = 60, test: int = 100, seed: int = 0) -> Path:
    """``folder``/{train,dev,test}.txt with that many sentences each, half positive; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    for name, n in (("train.txt", train), ("dev.txt", dev), ("test.txt", test)):
        lines = [sentence_tree(rng, positive=i % 2 == 0) for i in range(n)]
        rng.shuffle(lines)
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder
