"""Does attention find the syntax tree? Per layer and head of a trained attention model:

  mass    the share of a token's attention that lands on its tree neighbours (parent and children),
          averaged over tokens; the uniform-attention baseline is  #neighbours / #tokens attended;
  parent  how often the most-attended other token is the token's parent in the gold tree
          (Clark et al., 2019: "the most-attended-to word is the predicted head"; their best BERT head
          scored 34.5 against 26.3 UAS for the right-branching, fixed-offset baseline);
  child   how often the most-attended other token is one of the token's children.

With ``--tree gold`` (SST, whose gold trees are constituency trees: phrases, not word-to-word edges) the
relation is the **sister constituent**: the words of the subtree beside the token under its parent phrase
(in ``(the (lovely film))``, the sister of ``the`` is ``lovely film``; of ``lovely``, ``film``). Then

  mass    the share of a token's attention on its sister constituent (uniform: its size / tokens attended);
  sister  how often the most-attended other token lies in the sister constituent.

``--tree dep`` (the default) compares with the ``heads`` column: ListOps' gold tree, a text dataset's
dependency parse.

The baselines use position only: "parent = the token at offset k" for the best k. A token's own
self loop is left out of the argmax (attending to oneself says nothing about syntax), and so is
the ``<cls>`` node; a tie for the most attention (or none given to other tokens) counts as no
prediction, so a head that attends only to itself scores 0.

    python -m studies.attention_syntax outputs/neural_syntax                 # a run dir or a .pt file
    python -m studies.attention_syntax RUN --choose-on val --split test --max-examples 500 --out DIR
    python -m studies.attention_syntax multirun/sst/graph=complete,model=transformer,seed=0 --tree gold

The best head is **chosen on one split and scored on another**: by default chosen on ``--choose-on val``
and reported on ``--split test``. ``syntax.json`` then holds the test scores of every head, the head
chosen on validation with its test score (``best_parent_head``, ``chosen_on: "val"``), the validation
scores it was chosen from (``chosen_split_scores``), and the best head on test for comparison only
(``best_on_report_split``). ``--choose-on`` equal to ``--split`` chooses and reports on one split.

Writes ``syntax.json``, ``syntax_heads.png`` (layer x head heat maps) and ``syntax_example.png``
(one sentence's attention per layer and head, gold tree edges marked) to ``RUN/syntax`` or ``--out``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import torch

from data.graph_dataset import split_fingerprint
from engine.io import write_json
from tools.common import Run, output_dir, pyplot, run_parser
from tools.replay import Table

OFFSETS = [o for o in range(-12, 13) if o != 0]
TREES = ("dep", "gold")  # the heads column (ListOps' tree, a parse) | SST's gold constituency tree


def record_attention(model) -> list:
    """Make every attention aggregator keep its weights; returns the list each forward fills,
    one (E, H) tensor per layer in order (a shared block records once per layer it runs).
    Calling it again on the same model returns the same list."""
    if hasattr(model, "_attention_records"):
        return model._attention_records
    records = model._attention_records = []
    for block in model.blocks:
        agg = block.aggregator
        if not hasattr(agg, "record_attention"):
            raise ValueError(f"model {type(agg).__name__} has no attention to analyse: use gat or transformer")
        agg.record_attention = True
        agg.register_forward_hook(lambda module, args, out: records.append(module.last_attention))
    return records


def parents_of(g, heads: list[list[int]]) -> torch.Tensor:
    """(N,) the parent node of each node of the batched graph, -1 for roots and <cls>."""
    parent = torch.full((g.num_nodes(),), -1, dtype=torch.long)
    offset = 0
    for n, h in zip(g.batch_num_nodes().tolist(), heads):
        h = torch.tensor(h, dtype=torch.long)
        parent[offset : offset + len(h)] = torch.where(h >= 0, h + offset, -1)
        offset += n
    return parent


def clear_pick(attn: torch.Tensor, src, dst, is_token) -> torch.Tensor:
    """(E, H) bool: the edge of each receiver's most-attended other token, per head. Self loops and
    ``<cls>`` are left out; a tie for the most attention, or none given to other tokens, picks nothing."""
    n = len(is_token)
    candidate = (src != dst) & is_token[src]
    scores = attn.masked_fill(~candidate[:, None], -1.0)
    best = torch.full((n, attn.shape[1]), -1.0).scatter_reduce(0, dst[:, None].expand_as(scores), scores, "amax")
    is_best = (scores == best[dst]) & candidate[:, None]  # (E, H)
    ties = torch.zeros(n, attn.shape[1]).index_add_(0, dst, is_best.float())  # (N, H) tokens sharing the max
    return is_best & (ties[dst] == 1) & (best[dst] > 0)


def _hits(pick: torch.Tensor, dst, relation: torch.Tensor, n: int) -> torch.Tensor:
    """(N, H) bool: the receiver's picked token stands in ``relation`` (E,) to it."""
    return torch.zeros(n, pick.shape[1]).index_add_(0, dst, (pick & relation[:, None]).float()) > 0


def head_scores(attn: torch.Tensor, src, dst, parent, is_token) -> dict[str, torch.Tensor]:
    """Per head (H,) sums and counts for one layer of one batch; ``attn`` is (E, H). ``parent_node`` (N, H) is
    not a sum: which tokens' picked token is their parent, for the per-example counts."""
    n = len(parent)
    tree_edge = ((parent[dst] == src) | (parent[src] == dst)) & (src != dst)  # (E,)
    mass = torch.zeros(n, attn.shape[1]).index_add_(0, dst, attn * tree_edge[:, None])  # (N, H)
    has_nbr = torch.zeros(n, dtype=torch.bool)
    has_nbr[dst[tree_edge]] = True
    pick = clear_pick(attn, src, dst, is_token)  # (E, H)
    has_parent = is_token & (parent >= 0)
    children = torch.zeros(n, dtype=torch.long).index_add_(0, parent.clamp(min=0), has_parent.long())
    has_child = is_token & (children > 0)
    parent_node = _hits(pick, dst, parent[dst] == src, n) & has_parent[:, None]  # (N, H)
    return {
        "parent_node": parent_node,
        "mass": mass[is_token & has_nbr].sum(0),
        "mass_n": (is_token & has_nbr).sum(),
        "parent": parent_node.sum(0),
        "parent_n": has_parent.sum(),
        "child": _hits(pick, dst, parent[src] == dst, n)[has_child].sum(0),
        "child_n": has_child.sum(),
        "uniform": (
            torch.zeros(n).index_add_(0, dst, tree_edge.float())
            / torch.zeros(n).index_add_(0, dst, torch.ones_like(dst, dtype=torch.float)).clamp(min=1)
        )[is_token & has_nbr].sum(),
    }


def sister_pairs(parent: list[int], num_tokens: int) -> list[tuple[int, int]]:
    """``(i, j)``: token j lies in token i's sister constituent (the other child of i's parent phrase) in a
    gold tree over ``num_tokens`` tokens and phrase nodes numbered after them."""
    kids: list[list[int]] = [[] for _ in parent]
    for node, p in enumerate(parent):
        if p >= 0:
            kids[p].append(node)
    leaves: list[list[int]] = [[] for _ in parent]

    def words(node: int) -> list[int]:
        if not leaves[node]:
            leaves[node] = [node] if node < num_tokens else [w for k in kids[node] for w in words(k)]
        return leaves[node]

    pairs = []
    for i in range(num_tokens):
        if parent[i] >= 0:
            pairs += [(i, j) for sib in kids[parent[i]] if sib != i for j in words(sib)]
    return pairs


def related_scores(attn: torch.Tensor, src, dst, related, is_token) -> dict[str, torch.Tensor]:
    """Per head (H,) sums and counts of one layer of one batch against a token relation: ``related`` (E,)
    marks the edges src -> dst whose sender is related to the receiver (``attn`` is (E, H))."""
    n = len(is_token)
    related = related & (src != dst)
    mass = torch.zeros(n, attn.shape[1]).index_add_(0, dst, attn * related[:, None])  # (N, H)
    has_rel = torch.zeros(n, dtype=torch.bool)
    has_rel[dst[related]] = True
    hit = _hits(clear_pick(attn, src, dst, is_token), dst, related, n)  # a clear pick, and it is related
    rows = is_token & has_rel
    counts = torch.zeros(n).index_add_(0, dst, torch.ones_like(dst, dtype=torch.float)).clamp(min=1)
    return {
        "mass": mass[rows].sum(0),
        "mass_n": rows.sum(),
        "sister": hit[rows].sum(0),
        "sister_n": rows.sum(),
        "uniform": (torch.zeros(n).index_add_(0, dst, related.float()) / counts)[rows].sum(),
    }


def sister_offset_baseline(pairs_per_sentence: list[list[tuple[int, int]]]) -> dict:
    """ "The sister constituent holds token i + k": accuracy of the best fixed offset k."""
    hits, total = np.zeros(len(OFFSETS)), 0
    for pairs in pairs_per_sentence:
        by_token: dict[int, set] = {}
        for i, j in pairs:
            by_token.setdefault(i, set()).add(j)
        for i, js in by_token.items():
            total += 1
            hits += [i + o in js for o in OFFSETS]
    acc = hits / max(1, total)
    return {"sister": {"offset": OFFSETS[int(acc.argmax())], "acc": float(acc.max())}}


def offset_baselines(heads: list[list[int]], fixed: dict | None = None) -> dict:
    """Position-only predictors: accuracy of "parent = i + k" and "a child = i + k", for the offset k that is best
    here, or for the offsets ``fixed`` names (``{"parent": k, "child": k}``, chosen on another split)."""
    parent_hits, child_hits = np.zeros(len(OFFSETS)), np.zeros(len(OFFSETS))
    n_parent = n_child = 0
    for h in heads:
        children = [set() for _ in h]
        for i, p in enumerate(h):
            if p >= 0:
                children[p].add(i)
        for i, p in enumerate(h):
            if p >= 0:
                n_parent += 1
                parent_hits += [i + o == p for o in OFFSETS]
            if children[i]:
                n_child += 1
                child_hits += [i + o in children[i] for o in OFFSETS]
    parent_acc, child_acc = parent_hits / max(1, n_parent), child_hits / max(1, n_child)
    fixed = fixed or {}
    out = {}
    for name, acc in (("parent", parent_acc), ("child", child_acc)):
        k = OFFSETS.index(fixed[name]) if name in fixed else int(acc.argmax())
        out[name] = {"offset": OFFSETS[k], "acc": float(acc[k])}
    return out


def offset_hits(heads: list[list[int]], offset: int) -> list[int]:
    """Per example: how many of its tokens with a parent have it at ``i + offset`` (the best fixed offset's hits,
    example by example, to pair with a head's)."""
    return [sum(1 for i, p in enumerate(h) if p >= 0 and i + offset == p) for h in heads]


@torch.no_grad()
def analyse(
    run: Run,
    split: str = "test",
    max_examples: int | None = 1000,
    batch_size: int = 128,
    tree: str = "dep",
    offsets: dict | None = None,
) -> dict:
    """Every head's scores on ``split``, beside the best fixed offsets there, or beside ``offsets`` (the offsets
    chosen on another split: ``{"parent": k, "child": k}``, dep trees only)."""
    if tree not in TREES:
        raise ValueError(f"unknown --tree {tree!r}; valid: {', '.join(TREES)}")
    model = run.model
    if model.dynamic:
        raise ValueError("graph=knn rebuilds its edges in every layer; analyse a model trained on a fixed graph")
    model.impl = "sparse"  # DGL message passing: the weights come per edge
    records = record_attention(model)
    ds = run.split(split, max_examples)
    column = "heads" if tree == "dep" else "parent"
    if column not in ds.column_names:
        what = "trees to compare with" if tree == "dep" else "gold constituency trees (--tree gold is for SST)"
        raise ValueError(f"{run.config['dataset']['name']} has no {what}")
    heads = ds[column]
    pairs = [sister_pairs(p, len(t)) for p, t in zip(heads, ds["tokens"])] if tree == "gold" else None
    totals: dict[str, torch.Tensor] = {}
    by_example: list[torch.Tensor] = []  # (B, layers, H) per batch: each example's parents found, per head
    correct = start = 0
    for g, y in run.batches(ds, batch_size):
        records.clear()
        correct += (model(g).argmax(-1) == y).sum().item()
        src, dst = g.edges()
        is_token = g.ndata["pos"] >= 0
        if tree == "dep":
            parent = parents_of(g, heads[start : start + g.batch_size])
        else:  # the sister pairs of this batch, as keys receiver * N + sender
            starts = torch.cat([torch.zeros(1, dtype=torch.long), g.batch_num_nodes().cumsum(0)[:-1]])
            keys = [(i + o) * g.num_nodes() + j + o for o, ps in zip(starts.tolist(), pairs[start:]) for i, j in ps]
            related = torch.isin(dst * g.num_nodes() + src, torch.tensor(keys, dtype=torch.long))
        graph_of = torch.repeat_interleave(torch.arange(g.batch_size), g.batch_num_nodes())
        found = []
        for layer, attn in enumerate(records):
            scores = (
                head_scores(attn, src, dst, parent, is_token)
                if tree == "dep"
                else related_scores(attn, src, dst, related, is_token)
            )
            if "parent_node" in scores:
                hits = scores.pop("parent_node").float()
                found.append(torch.zeros(g.batch_size, hits.shape[1]).index_add_(0, graph_of, hits))
            for key, value in scores.items():
                totals[(layer, key)] = totals.get((layer, key), 0) + value
        if found:
            by_example.append(torch.stack(found, 1))
        start += g.batch_size
    layers = len(records)

    def grid(key):
        return [(totals[(ly, key)] / totals[(ly, key + "_n")].clamp(min=1)).tolist() for ly in range(layers)]

    mass = grid("mass")
    uniform = float(totals[(0, "uniform")] / totals[(0, "mass_n")].clamp(min=1))
    hits = (
        {"parent_acc": grid("parent"), "child_acc": grid("child")} if tree == "dep" else {"sister_acc": grid("sister")}
    )
    first = "parent_acc" if tree == "dep" else "sister_acc"
    best = max(
        ((ly, hd) for ly in range(layers) for hd in range(len(hits[first][0]))),
        key=lambda lh: hits[first][lh[0]][lh[1]],
    )
    per_example = {}
    baselines = offset_baselines(heads, offsets) if tree == "dep" else sister_offset_baseline(pairs)
    if tree == "dep":  # kept whole here; main keeps the chosen head's column only (choose_on, per_example_of)
        off = baselines["parent"]["offset"]
        labels = ds["label"] if "label" in ds.column_names else [0] * len(ds)
        per_example = {
            "per_example": {
                "fingerprint": split_fingerprint(ds["tokens"], labels),
                "parents": [sum(1 for p in h if p >= 0) for h in heads],
                "offset_hits": offset_hits(heads, off),
                "head_hits": torch.cat(by_example).round().long().tolist(),  # (examples, layers, heads)
            }
        }
    return {
        "checkpoint": str(run.path),
        "model": run.config["model"]["name"],
        "graph": run.config["graph"]["name"],
        "tree": tree,
        "split": split,
        "examples": len(ds),
        "accuracy": correct / len(ds),
        "mass_on_tree": mass,
        **hits,
        "uniform_mass_baseline": uniform,
        "offset_baselines": baselines,
        **({} if offsets else {"offset_chosen_on": split}),  # main names the other split
        f"best_{first[:-4]}_head": {"layer": best[0] + 1, "head": best[1] + 1, "acc": hits[first][best[0]][best[1]]},
        "best_mass_head": max(
            ({"layer": ly + 1, "head": hd + 1, "mass": m} for ly, row in enumerate(mass) for hd, m in enumerate(row)),
            key=lambda d: d["mass"],
        ),
        **per_example,
    }


def per_example_of(result: dict) -> dict:
    """``result`` with its per-example counts cut to the chosen parent head's column: ``head_hits`` becomes one
    count per example (that head's parents found), beside ``parents`` and ``offset_hits``, so that
    ``seeds_verdict`` can pair the head with the best fixed offset example by example."""
    kept = result.get("per_example")
    if not kept or not isinstance(kept["head_hits"][0], list):
        return result
    best = result["best_parent_head"]
    ly, hd = best["layer"] - 1, best["head"] - 1
    return {**result, "per_example": {**kept, "head_hits": [row[ly][hd] for row in kept["head_hits"]]}}


def choose_on(chosen: dict, reported: dict, choose_split: str) -> dict:
    """``reported`` (the scores on the split reported) with its best heads replaced by the heads that are best
    on ``chosen`` (the same model scored on the split the choice is made on, e.g. validation).

    The chosen head's score is read from ``reported``; the head that would be best on the reported split
    is kept as ``best_on_report_split`` for comparison only."""
    first = "parent_acc" if "parent_acc" in chosen else "sister_acc"
    key = f"best_{first[:-4]}_head"
    grid = chosen[first]
    ly, hd = max(((ly, hd) for ly in range(len(grid)) for hd in range(len(grid[0]))), key=lambda lh: grid[lh[0]][lh[1]])
    mass = chosen["mass_on_tree"]
    my, mh = max(((ly, hd) for ly in range(len(mass)) for hd in range(len(mass[0]))), key=lambda lh: mass[lh[0]][lh[1]])
    return {
        **reported,
        "chosen_on": choose_split,
        key: {"layer": ly + 1, "head": hd + 1, "acc": reported[first][ly][hd], f"{choose_split}_acc": grid[ly][hd]},
        "best_mass_head": {
            "layer": my + 1,
            "head": mh + 1,
            "mass": reported["mass_on_tree"][my][mh],
            f"{choose_split}_mass": mass[my][mh],
        },
        "best_on_report_split": {key: reported[key], "best_mass_head": reported["best_mass_head"]},
        "chosen_split_scores": {
            "split": choose_split,
            "examples": chosen["examples"],
            "accuracy": chosen["accuracy"],
            "mass_on_tree": chosen["mass_on_tree"],
            first: grid,
        },
    }


def format_report(r: dict) -> str:
    dep = r.get("tree", "dep") == "dep"
    hit_keys = ("parent_acc", "child_acc") if dep else ("sister_acc",)
    names = " / ".join(["mass"] + [k[:-4] for k in hit_keys])
    layers, heads = len(r["mass_on_tree"]), len(r["mass_on_tree"][0])
    what = "tree" if dep else "gold constituency tree (sister constituents)"
    chosen = r.get("chosen_on", r["split"])
    lines = [
        f"{r['model']} on {r['graph']} graphs against the {what}, {r['examples']} {r['split']} examples "
        f"(accuracy {r['accuracy']:.3f}); best heads chosen on {chosen}, scored on {r['split']}",
        "",
        "| layer | " + " | ".join(f"head {h + 1}: {names}" for h in range(heads)) + " |",
        "|---|" + "---|" * heads,
    ]
    for ly in range(layers):
        cells = [" / ".join(f"{r[k][ly][h]:.2f}" for k in ("mass_on_tree",) + hit_keys) for h in range(heads)]
        lines.append(f"| {ly + 1} | " + " | ".join(cells) + " |")
    off = r["offset_baselines"]
    lines.append("")
    for key in hit_keys:
        rel = key[:-4]
        b = r[f"best_{rel}_head"] if f"best_{rel}_head" in r else None
        best = f"layer {b['layer']} head {b['head']}, {b['acc']:.1%}" if b else f"{max(max(row) for row in r[key]):.1%}"
        lines.append(
            f"best head for {'a ' if rel == 'child' else ''}{rel}: {best}; "
            f"best fixed offset: {off[rel]['offset']:+d}, {off[rel]['acc']:.1%}"
        )
    lines.append(
        f"most attention on {'tree neighbours' if dep else 'the sister constituent'}: layer "
        f"{r['best_mass_head']['layer']} head {r['best_mass_head']['head']}, {r['best_mass_head']['mass']:.1%}; "
        f"uniform attention would put {r['uniform_mass_baseline']:.1%} there"
    )
    return "\n".join(lines)


SST_TITLE = "# Does a complete-graph Transformer trained on SST find either tree?"
SST_INTRO = """`make sst_syntax` (after `make experiment E=sst`): `studies/attention_syntax` on the three seeds of
`model=transformer graph=complete` of the SST-5 experiment, against SST's gold constituency trees
(`--tree gold`: the *sister constituent*, the words beside a token under its parent phrase) and
against spaCy's dependency trees (`--tree dep`: parent and children), on the first 1,000 test
sentences. 4 layers x 4 heads. Per-seed files: `sst_syntax/seed*_{gold,dep}/syntax.json`, from which
this table is drawn (`make sst_syntax` ends with `python -m tools.check_docs --render docs/results/sst_syntax.md`);
heat maps and one sentence's attention for seed 0 in `sst_syntax/seed0_*/`."""


def _best(r: dict, rel: str) -> float:
    """The reported score of the best head for ``rel`` (its ``best_<rel>_head``, else the grid's maximum)."""
    b = r.get(f"best_{rel}_head")
    return b["acc"] if b else max(max(row) for row in r[f"{rel}_acc"])


def _vs_offset(r: dict, rel: str) -> str:
    """The best head's score for ``rel`` beside the best fixed offset's: ``0.242 (+1: 0.631)``."""
    off = r["offset_baselines"][rel]
    return f"{_best(r, rel):.3f} ({off['offset']:+d}: {off['acc']:.3f})"


def sst_seeds_table(*results: dict) -> str:
    """``docs/results/sst_syntax.md``'s generated part from its ``syntax.json`` files, given as (gold, dep) per
    seed, in order: a row per seed (read from the checkpoint both were scored on), each head score beside its
    baseline (uniform attention, the best fixed offset)."""
    if not results or len(results) % 2:
        raise ValueError(f"sst_seeds_table: a gold and a dep result per seed, got {len(results)} results")
    rows = [
        "| seed | test acc (these 1,000) | gold: best head's mass on the sister constituent (uniform) "
        "| gold: best head, most-attended word in it (best fixed offset) "
        "| dep: best head's mass on tree neighbours (uniform) | dep: best head, most-attended = parent (best offset) "
        "| dep: best head, = a child (best offset) |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, (gold, dep) in enumerate(zip(results[::2], results[1::2], strict=True)):
        checkpoint = gold.get("checkpoint", "")
        seed = re.search(r"seed=(\d+)", checkpoint)
        if (gold.get("tree"), dep.get("tree")) != ("gold", "dep") or dep.get("checkpoint") != checkpoint or not seed:
            raise ValueError(
                f"pair {k}: expected a gold then a dep result of one checkpoint with seed=N in its path, got "
                f"{gold.get('tree')} of {checkpoint!r}, {dep.get('tree')} of {dep.get('checkpoint')!r}"
            )
        rows.append(
            f"| {seed[1]} | {gold['accuracy']:.3f} "
            f"| {gold['best_mass_head']['mass']:.3f} ({gold['uniform_mass_baseline']:.3f}) | {_vs_offset(gold, 'sister')} "
            f"| {dep['best_mass_head']['mass']:.3f} ({dep['uniform_mass_baseline']:.3f}) "
            f"| {_vs_offset(dep, 'parent')} | {_vs_offset(dep, 'child')} |"
        )
    return "\n".join([SST_TITLE, "", SST_INTRO, "", *rows]) + "\n"


def plot_heads(r: dict, path: Path) -> Path:
    plt = pyplot()

    off = r["offset_baselines"]
    if r.get("tree", "dep") == "dep":
        panels = [
            ("mass_on_tree", f"attention mass on tree neighbours\n(uniform: {r['uniform_mass_baseline']:.2f})"),
            ("parent_acc", f"most-attended = parent\n(best offset: {off['parent']['acc']:.2f})"),
            ("child_acc", f"most-attended = a child\n(best offset: {off['child']['acc']:.2f})"),
        ]
    else:
        panels = [
            ("mass_on_tree", f"attention mass on the sister constituent\n(uniform: {r['uniform_mass_baseline']:.2f})"),
            ("sister_acc", f"most-attended in the sister constituent\n(best offset: {off['sister']['acc']:.2f})"),
        ]
    layers, heads = len(r["mass_on_tree"]), len(r["mass_on_tree"][0])
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels) + 0.5 * heads, 0.5 * layers + 2.4))
    for ax, (key, title) in zip(axes, panels):
        data = np.array(r[key])
        im = ax.imshow(data, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        for (i, j), v in np.ndenumerate(data):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w" if v < 0.6 else "k")
        ax.set_title(title, fontsize=9)
        ax.set(xlabel="head", ylabel="layer")
        ax.set_xticks(range(heads), [str(h + 1) for h in range(heads)])
        ax.set_yticks(range(layers), [str(ly + 1) for ly in range(layers)])
    fig.colorbar(im, ax=axes, shrink=0.8)
    fig.suptitle(f"{r['model']} on {r['graph']} graphs: does attention follow the tree?", fontsize=10, y=1.04)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


@torch.no_grad()
def plot_example(
    run: Run, path: Path, split: str = "test", min_len: int = 10, max_len: int = 18, tree: str = "dep"
) -> Path:
    """One sentence's attention matrices, a panel per layer and head; dots mark the tree's relation
    (each token's parent; with ``tree="gold"``, its sister constituent)."""
    plt = pyplot()

    ds = run.split(split)
    index = next((i for i, t in enumerate(ds["tokens"]) if min_len <= len(t) <= max_len), 0)
    ex = ds.select([index])
    run.model.impl = "sparse"  # the weights per edge
    records = record_attention(run.model)
    records.clear()
    (g, _), *_ = run.batches(ex, 1)
    run.model(g)
    src, dst = g.edges()
    tokens, heads = ex["tokens"][0], ex["heads"][0]
    n = len(tokens)
    layers, num_heads = len(records), records[0].shape[1]
    fig, axes = plt.subplots(layers, num_heads, figsize=(2.3 * num_heads, 2.3 * layers), squeeze=False)
    for ly, attn in enumerate(records):
        for hd in range(num_heads):
            mat = torch.zeros(g.num_nodes(), g.num_nodes())
            mat[dst, src] = attn[:, hd]
            ax = axes[ly][hd]
            ax.imshow(mat[:n, :n], cmap="magma", vmin=0, vmax=1)
            kids = (
                [(i, p) for i, p in enumerate(heads) if p >= 0] if tree == "dep" else sister_pairs(ex["parent"][0], n)
            )
            ax.scatter([p for i, p in kids], [i for i, p in kids], s=6, c="cyan", marker="o", label="parent")
            ax.set_xticks([])
            ax.set_yticks([])
            if ly == layers - 1:
                ax.set_xticks(range(n), tokens, rotation=90, fontsize=5)
            if hd == 0:
                ax.set_yticks(range(n), tokens, fontsize=5)
                ax.set_ylabel(f"layer {ly + 1}", fontsize=8)
            if ly == 0:
                ax.set_title(f"head {hd + 1}", fontsize=8)
    relation = "its parent in the tree" if tree == "dep" else "its sister constituent in the gold tree"
    fig.suptitle(f"row i: where token i attends; cyan dots: {relation}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# the table tools.check_docs replays: the seeds of make sst_syntax's loop, the three complete-graph Transformers
# of make experiment E=sst
REPLAYS = [
    Table(
        "docs/results/sst_syntax.md",
        tuple(f"docs/results/sst_syntax/seed{s}_{t}/syntax.json" for s in (0, 1, 2) for t in ("gold", "dep")),
        sst_seeds_table,
        "studies.attention_syntax.sst_seeds_table",
        generated_only=True,  # the answer below its '## ' heading is prose
    )
]


def main(argv=None) -> int:
    parser = run_parser(__doc__, "syntax")
    parser.add_argument("--split", default="test", help="the split reported: train | val | test (default test)")
    parser.add_argument(
        "--choose-on",
        default="val",
        help="the split the best head is chosen on (default val; = --split: no held-out choice)",
    )
    parser.add_argument("--max-examples", type=int, default=1000)
    parser.add_argument(
        "--tree", default="dep", choices=TREES, help="dep: the heads column (ListOps' tree, a parse); gold: SST's trees"
    )
    args = parser.parse_args(argv)
    try:
        run = Run.load(args.run)
        if args.choose_on != args.split:  # heads and offsets chosen on one split, scored on the other
            chosen = analyse(run, args.choose_on, args.max_examples, tree=args.tree)
            offsets = {k: v["offset"] for k, v in chosen["offset_baselines"].items()} if args.tree == "dep" else None
            result = analyse(run, args.split, args.max_examples, tree=args.tree, offsets=offsets)
            result = choose_on(chosen, result, args.choose_on)
            if offsets:
                result["offset_chosen_on"] = args.choose_on
        else:
            result = analyse(run, args.split, args.max_examples, tree=args.tree)
            result["chosen_on"] = args.split
        result = per_example_of(result)
        out = output_dir(args, run, "syntax")
        write_json(out / "syntax.json", result)
        print(format_report(result))
        print(f"saved {plot_heads(result, out / 'syntax_heads.png')}")
        print(f"saved {plot_example(run, out / 'syntax_example.png', args.split, tree=args.tree)}")
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
