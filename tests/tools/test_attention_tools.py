"""studies/attention_syntax and studies/prune_heads on attention that is (or is not) the tree."""

import json

import numpy as np
import pytest
import torch

from data.graphs import GraphConstruction
from studies import attention_syntax, prune_heads
from tests.conftest import compose_config
from tools import stats
from train import run


# --------------------------------------------------------------------------------------------
# studies/attention_syntax and studies/prune_heads
# --------------------------------------------------------------------------------------------
def test_head_scores_on_attention_that_is_the_tree():
    """Head 0 attends only to each token's parent, head 1 only to itself (a self loop says nothing)."""
    heads = [-1, 0, 0, 2, 2]
    con = GraphConstruction(name="complete")
    g = con([3, 4, 5, 6, 7], heads)
    src, dst = g.edges()
    parent = attention_syntax.parents_of(g, [heads])
    attn = torch.zeros(g.num_edges(), 2)
    attn[:, 0] = ((parent[dst] == src) | ((parent[dst] < 0) & (src == 1))).float()  # the root looks at token 1
    attn[:, 1] = (src == dst).float()
    s = attention_syntax.head_scores(attn, src, dst, parent, g.ndata["pos"] >= 0)
    assert s["parent_n"] == 4 and s["parent"].tolist()[0] == 4  # every non-root token: its parent
    assert s["child_n"] == 2 and s["child"].tolist()[0] == 1  # the root's pick (token 1) is its child
    torch.testing.assert_close(s["mass"] / s["mass_n"], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(s["uniform"] / s["mass_n"], torch.tensor((2 / 5 + 1 / 5 + 3 / 5 + 1 / 5 + 1 / 5) / 5))
    assert s["parent"].tolist()[1] == 0 and s["child"].tolist()[1] == 0  # self-attention predicts nothing


def test_a_tie_for_the_most_attention_is_no_prediction():
    """Uniform attention ties every other token: no head is credited with the root (token 0) by index order."""
    heads = [-1, 0, 0, 1]
    g = GraphConstruction(name="complete")([3, 4, 5, 6], heads)
    src, dst = g.edges()
    parent = attention_syntax.parents_of(g, [heads])
    s = attention_syntax.head_scores(torch.full((g.num_edges(), 1), 0.25), src, dst, parent, g.ndata["pos"] >= 0)
    assert s["parent"].tolist() == [0] and s["child"].tolist() == [0]


def test_sister_pairs_of_a_gold_tree():
    """(the (lovely film)): the sister of `the` is `lovely film`; of `lovely`, `film`; of `film`, `lovely`."""
    parent = [4, 3, 3, 4, -1]  # tokens 0-2, phrase 3 = (lovely film), root 4 = (the 3)
    assert sorted(attention_syntax.sister_pairs(parent, 3)) == [(0, 1), (0, 2), (1, 2), (2, 1)]
    baseline = attention_syntax.sister_offset_baseline([attention_syntax.sister_pairs(parent, 3)])["sister"]
    assert baseline == {"offset": 1, "acc": 2 / 3}  # `the` and `lovely` have the next word in theirs, `film` not


def test_related_scores_on_attention_that_is_the_relation():
    """Head 0 attends only inside each token's sister constituent, head 1 only to itself."""
    parent, n = [4, 3, 3, 4, -1], 3
    g = GraphConstruction(name="complete")([5, 6, 7], [-1, 2, 0])
    src, dst = g.edges()
    pairs = set(attention_syntax.sister_pairs(parent, n))
    related = torch.tensor([(int(d), int(s)) in pairs for s, d in zip(src, dst)])
    attn = torch.zeros(g.num_edges(), 2)
    attn[:, 0] = related.float()
    attn[dst == 0, 0] = attn[dst == 0, 0] * torch.tensor([0.0, 0.7, 0.3])[src[dst == 0]]  # token 0: two sisters
    attn[:, 1] = (src == dst).float()
    r = attention_syntax.related_scores(attn, src, dst, related, g.ndata["pos"] >= 0)
    assert r["sister_n"] == 3 and r["sister"].tolist() == [3, 0]  # a clear pick in the constituent; self says nothing
    torch.testing.assert_close(r["mass"] / r["mass_n"], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(r["uniform"] / r["mass_n"], torch.tensor((2 / 3 + 1 / 3 + 1 / 3) / 3))


def test_offset_baselines():
    r = attention_syntax.offset_baselines([[-1, 0, 0], [-1, 0, 1]])
    assert r["parent"] == {"offset": -1, "acc": 0.75}  # 3 of the 4 parents sit just before
    assert r["child"] == {"offset": 1, "acc": 1.0}
    # offsets chosen on another split are scored here, not chosen again
    fixed = attention_syntax.offset_baselines([[-1, 0, 0], [-1, 0, 1]], {"parent": -2, "child": 2})
    assert fixed["parent"] == {"offset": -2, "acc": 0.25} and fixed["child"] == {
        "offset": 2,
        "acc": pytest.approx(1 / 3),
    }


@pytest.fixture(scope="module")
def trained_attention(tmp_path_factory):
    out = tmp_path_factory.mktemp("attn")
    cfg = compose_config(
        ["debug=tiny", "trainer.progress=false", "logger=none", "model=transformer", "model.num_heads=2"]
    )
    run(cfg, out)
    return out


def test_attention_syntax_command(trained_attention, tmp_path, capsys):
    assert attention_syntax.main([str(trained_attention), "--out", str(tmp_path), "--max-examples", "40"]) == 0
    r = json.loads((tmp_path / "syntax.json").read_text())
    assert len(r["parent_acc"]) == 2 and len(r["parent_acc"][0]) == 2  # layers x heads of debug=tiny
    assert all(0 <= v <= 1 for row in r["mass_on_tree"] + r["parent_acc"] + r["child_acc"] for v in row)
    assert r["examples"] == 40 and 0 < r["uniform_mass_baseline"] < 1
    for png in ("syntax_heads.png", "syntax_example.png"):
        assert (tmp_path / png).stat().st_size > 5000
    assert "best fixed offset" in capsys.readouterr().out


def test_prune_heads_command(trained_attention, tmp_path, capsys):
    assert prune_heads.main([str(trained_attention), "--out", str(tmp_path), "--no-progress"]) == 0
    r = json.loads((tmp_path / "prune.json").read_text())
    assert [s["heads_kept"] for s in r["steps"]] == [4, 3, 2, 1]
    removed = [(s["removed"]["layer"], s["removed"]["head"]) for s in r["steps"][1:]]
    assert len(set(removed)) == 3
    assert len(r["importance"]) == 4 and (tmp_path / "prune.png").is_file()
    assert "fewest heads whose validation accuracy is within 1 point" in capsys.readouterr().out
    assert [c["points"] for c in r["choices"]] == [1, 5]


def test_heads_to_keep_are_chosen_on_validation_never_on_test():
    steps = [  # test falls at 3 heads kept, validation only at 2: the choice follows validation
        {"heads_kept": 4, "val_acc": 0.80, "test_acc": 0.80},
        {"heads_kept": 3, "val_acc": 0.80, "test_acc": 0.70},
        {"heads_kept": 2, "val_acc": 0.78, "test_acc": 0.69},
        {"heads_kept": 1, "val_acc": 0.60, "test_acc": 0.75},
    ]
    one, five = prune_heads.choices(steps)
    assert (one["heads_kept"], one["test_acc"]) == (3, 0.70)  # 2 heads lose 2 val points > 1
    assert (five["heads_kept"], five["test_acc"]) == (2, 0.69)  # 1 head loses 20 > 5, whatever its test


def test_pruning_greedy_and_the_full_model_untouched(trained_attention, tmp_path):
    from tools.common import Run, accuracy

    run_ = Run.load(trained_attention)
    batches = run_.batches(run_.split("test"))
    before = accuracy(run_.model, batches)
    r = prune_heads.prune(run_, val_examples=32, method="greedy", progress=False)
    assert r["steps"][0]["test_acc"] == pytest.approx(before)
    assert all(b.aggregator.head_mask is None for b in run_.model.blocks)  # masks are cleared afterwards
    assert accuracy(run_.model, batches) == pytest.approx(before)
    assert [s["heads_kept"] for s in r["steps"]] == [4, 3, 2, 1] and r["method"] == "greedy"


def test_analysis_tools_refuse_models_without_attention(tmp_path, capsys):
    cfg = compose_config(["debug=tiny", "trainer.progress=false", "logger=none", "model=sum", "trainer.max_epochs=1"])
    run(cfg, tmp_path / "run")
    assert attention_syntax.main([str(tmp_path / "run")]) == 2
    assert "no attention" in capsys.readouterr().err
    assert prune_heads.main([str(tmp_path / "run")]) == 2
    assert "no attention heads" in capsys.readouterr().err
    assert prune_heads.main([str(tmp_path / "missing")]) == 2


def test_offset_hits_count_each_examples_parents_at_the_offset():
    heads = [[-1, 0, 0], [-1, 0, 1], [1, -1]]
    assert attention_syntax.offset_hits(heads, -1) == [1, 2, 0]
    assert attention_syntax.offset_hits(heads, 1) == [0, 0, 1]


def test_the_syntax_file_keeps_the_chosen_heads_hits_example_by_example(trained_attention, tmp_path):
    """Summed over the examples, the chosen head's hits and the offset's are the accuracies the file reports."""
    assert attention_syntax.main([str(trained_attention), "--out", str(tmp_path), "--max-examples", "40"]) == 0
    r = json.loads((tmp_path / "syntax.json").read_text())
    kept = r["per_example"]
    assert len(kept["parents"]) == len(kept["head_hits"]) == len(kept["offset_hits"]) == 40
    assert all(isinstance(h, int) and 0 <= h <= n for h, n in zip(kept["head_hits"], kept["parents"]))
    tokens = sum(kept["parents"])
    assert sum(kept["head_hits"]) / tokens == pytest.approx(r["best_parent_head"]["acc"], abs=1e-6)
    assert sum(kept["offset_hits"]) / tokens == pytest.approx(r["offset_baselines"]["parent"]["acc"], abs=1e-6)
    assert len(kept["fingerprint"]) == 16


def _seed(hits, parents, offset_hits, chosen_on="val", fingerprint="f" * 16):
    tokens = sum(parents)
    return {
        "split": "test",
        "chosen_on": chosen_on,
        "best_parent_head": {"layer": 1, "head": 1, "acc": sum(hits) / tokens},
        "offset_baselines": {"parent": {"offset": -1, "acc": sum(offset_hits) / tokens}},
        "per_example": {"fingerprint": fingerprint, "parents": parents, "offset_hits": offset_hits, "head_hits": hits},
    }


def test_seeds_verdict_pairs_the_heads_with_the_offset_over_examples():
    from studies.attention_syntax.seeds import seeds_verdict

    rng = np.random.default_rng(0)
    parents = rng.integers(5, 30, size=400).tolist()
    offset = [int(rng.binomial(n, 0.2)) for n in parents]
    # each seed's head finds what the offset finds and one parent more in a third of the examples: a gain that is
    # small beside the examples' own spread, but the same example by example
    seeds = [[o + int(rng.random() < 1 / 3) for o in offset] for _ in range(3)]
    v = seeds_verdict([_seed(s, parents, offset) for s in seeds])
    tokens = sum(parents)
    gain = np.mean([sum(s) for s in seeds]) / tokens - sum(offset) / tokens
    assert v["diff"] == pytest.approx(gain) and v["rule"] == "paired" and v["verdict"] == "A higher"
    assert v["examples"] == 400 and v["tokens_with_a_parent"] == tokens
    # unpaired, each side's binomial error over the tokens would hide a gain this size
    unpaired = stats.compare(
        stats.Cell([sum(s) / tokens for s in seeds], n=len(parents)),
        stats.Cell([sum(offset) / tokens], n=len(parents), deterministic=True),
    )
    assert unpaired.verdict == stats.LEVEL_ANSWER
    # heads that find exactly the offset's parents: nothing to find
    assert seeds_verdict([_seed(offset, parents, offset)] * 3)["verdict"] == stats.LEVEL_ANSWER


def test_seeds_verdict_refuses_heads_chosen_on_test_and_seeds_on_other_examples():
    from studies.attention_syntax.seeds import main, seeds_verdict

    parents, offset = [3, 4, 5], [1, 1, 1]
    good = _seed([2, 2, 2], parents, offset)
    with pytest.raises(ValueError, match="chosen on test"):
        seeds_verdict([good, _seed([2, 2, 2], parents, offset, chosen_on="test")])
    with pytest.raises(ValueError, match="other examples"):
        seeds_verdict([good, _seed([2, 2, 2], parents, offset, fingerprint="0" * 16)])
    old = {k: v for k, v in good.items() if k != "per_example"}
    with pytest.raises(ValueError, match="no per-example counts"):
        seeds_verdict([good, old])
    assert main(["/nonexistent/folder", "--out", "/tmp/never-written.json"]) == 2


def test_the_test_term_is_the_ratios_variance_over_examples_drawn_again():
    """Short expressions fare far better than long ones: holding the token count fixed would understate the test
    term. The rule's term must match the variance of (head - offset) token accuracy over examples drawn again."""
    from studies.attention_syntax.seeds import seeds_verdict

    rng = np.random.default_rng(1)
    parents = rng.integers(1, 40, size=600)
    head = np.where(parents <= 4, parents, rng.binomial(parents, 0.15))  # short ones: every parent found
    offset = rng.binomial(parents, 0.2)
    v = seeds_verdict([_seed(head.tolist(), parents.tolist(), offset.tolist())] * 3)  # no seed spread
    draws = rng.integers(0, len(parents), size=(4000, len(parents)))
    boot = (head[draws].sum(1) - offset[draws].sum(1)) / parents[draws].sum(1)
    assert v["se"] ** 2 == pytest.approx(boot.var(), rel=0.1)  # the seeds add nothing: se^2 is the test term
    assert v["diff"] == pytest.approx((head.sum() - offset.sum()) / parents.sum())
