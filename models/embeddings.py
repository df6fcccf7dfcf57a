"""Word embeddings shared by every model family with an embedding table: learned from scratch or started
from GloVe (``data/glove.py``). One place: the typed configs inherit :class:`EmbeddingOptions`, and each
family's builder asks :func:`make_embedding` for its table.

``model.embeddings``: ``learned`` (an ``nn.Embedding`` the model makes itself, as before the option existed)
or ``glove`` (glove.6B 50-d vectors looked up lower-cased; words GloVe lacks and the special tokens get
random trainable rows; a linear projection 50 -> ``hidden_dim`` when they differ). ``model.glove_freeze``:
keep the GloVe rows fixed (only the missing rows and the projection train) or fine-tune every row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from torch import nn

log = logging.getLogger(__name__)

EMBEDDINGS = ("learned", "glove")


@dataclass(frozen=True)
class EmbeddingOptions:
    """The embedding keys of every family whose model has an embedding table (conf/encoder/default.yaml,
    conf/model/treelstm.yaml, conf/model/recursive.yaml)."""

    embeddings: str  # learned | glove
    glove_freeze: bool  # glove: the GloVe rows stay fixed (true) or are fine-tuned (false)

    def check_embeddings(self) -> None:
        if self.embeddings not in EMBEDDINGS:
            raise ValueError(f"unknown model.embeddings {self.embeddings!r}; valid: {', '.join(EMBEDDINGS)}")
        if not isinstance(self.glove_freeze, bool):
            raise ValueError(f"model.glove_freeze must be true or false, got {self.glove_freeze!r}")


def len_of(vocab) -> int:
    """The vocabulary's size: ``vocab`` is a size or a ``Vocab``."""
    return vocab if isinstance(vocab, int) else len(vocab)


def make_embedding(options: EmbeddingOptions, vocab, hidden_dim: int) -> nn.Module | None:
    """The model's embedding table for ``vocab``: ``None`` for ``learned`` (the model makes its own
    ``nn.Embedding``, exactly as before this option), a :class:`data.glove.GloVeEmbedding` for ``glove``
    (its vocabulary coverage in ``.coverage``, logged here). ``vocab``: a ``data.vocab.Vocab`` (an int, the
    vocabulary's size, is enough for ``learned``); its ``counts`` (the training split's, when it was built
    from one) add the token coverage."""
    if options.embeddings == "learned":
        return None
    from data.glove import GloVeEmbedding, GloVeError

    itos = getattr(vocab, "itos", None)
    if itos is None:
        raise ValueError("model.embeddings=glove needs the vocabulary's tokens, not only its size: pass the Vocab")
    try:
        module, coverage = GloVeEmbedding.from_vocab(
            itos, freeze=options.glove_freeze, hidden_dim=hidden_dim, counts=getattr(vocab, "counts", None)
        )
    except GloVeError as e:  # missing or damaged package: the user's to fix, one line (engine.config)
        raise ValueError(str(e)) from None
    module.coverage = {"kind": "glove", "freeze": options.glove_freeze, **coverage}
    tokens = coverage.get("token_coverage")
    log.info(
        "GloVe 6B 50d (%s): %d of %d vocabulary types found (%.1f%%)%s",
        "frozen" if options.glove_freeze else "fine-tuned",
        coverage["types_found"],
        coverage["types"],
        100 * (coverage["type_coverage"] or 0.0),
        f", {100 * tokens:.1f}% of the training tokens" if tokens is not None else "",
    )
    return module


def embedding_summary(model: nn.Module) -> dict:
    """What results.json records of a model's embeddings: ``{"kind": "learned"}`` or GloVe's options and
    coverage (types, types_found, type_coverage, tokens, tokens_found, token_coverage)."""
    return dict(getattr(getattr(model, "embed", None), "coverage", None) or {"kind": "learned"})
