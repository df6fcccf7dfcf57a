"""Token vocabulary: built from the training split, saved inside every checkpoint."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

PAD, UNK, CLS, PHRASE = "<pad>", "<unk>", "<cls>", "<phrase>"
SPECIALS = (PAD, UNK, CLS, PHRASE)  # <phrase>: the token of graph=binary_tree's phrase nodes
LEGACY_SPECIALS = SPECIALS[:3]  # vocabularies saved before <phrase> existed still load


class Vocab:
    """A list of tokens and its inverse. Ids 0-3 are ``<pad>``, ``<unk>``, ``<cls>``, ``<phrase>``."""

    def __init__(self, tokens: Iterable[str]):
        self.itos = list(tokens)
        if tuple(self.itos[: len(LEGACY_SPECIALS)]) != LEGACY_SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}, got {self.itos[:4]}")
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.counts: Counter | None = None  # the training split's counts (build); not saved in checkpoints
        if len(self.stoi) != len(self.itos):
            raise ValueError("a vocabulary holds each token once")

    @classmethod
    def build(cls, sentences: Iterable[list[str]], min_freq: int = 1) -> Vocab:
        """Tokens seen at least ``min_freq`` times, most frequent first (ties alphabetical)."""
        return cls.from_counts(Counter(t for s in sentences for t in s), min_freq)

    @classmethod
    def from_counts(cls, counts: Counter, min_freq: int = 1) -> Vocab:
        """:meth:`build` from the training split's token counts (``data.splits.token_counts`` counts them)."""
        kept = sorted(
            (t for t, c in counts.items() if c >= min_freq and t not in SPECIALS), key=lambda t: (-counts[t], t)
        )
        vocab = cls(list(SPECIALS) + kept)
        vocab.counts = counts  # model.embeddings=glove reports the share of training tokens GloVe knows
        return vocab

    def encode(self, tokens: list[str]) -> list[int]:
        unk = self.stoi[UNK]
        return [self.stoi.get(t, unk) for t in tokens]

    def __len__(self) -> int:
        return len(self.itos)

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def to_list(self) -> list[str]:
        """Plain list, for checkpoints (loads with ``torch.load(weights_only=True)``)."""
        return list(self.itos)

    @property
    def cls_id(self) -> int:
        return self.stoi[CLS]

    @property
    def phrase_id(self) -> int:
        if PHRASE not in self.stoi:
            raise ValueError("this vocabulary predates graph=binary_tree (no <phrase> token): retrain the model")
        return self.stoi[PHRASE]
