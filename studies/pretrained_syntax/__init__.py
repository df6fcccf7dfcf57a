"""Which heads of a pretrained Transformer find the parse? Clark et al. (2019), *What Does BERT Look At?*,
measured on SST with spaCy's dependency parse of the treebank's own tokens (Clark used gold Stanford
dependencies on WSJ) and SST's gold constituency trees.

The analysis takes any model through one injected function,
``attention_fn(words) -> (A, word_of_piece)``: ``A`` is the piece-level attention ``[L, H, P, P]`` (row =
the attending piece, each row sums to 1 over all P pieces, ``[CLS]`` and ``[SEP]`` included) and
``word_of_piece[p]`` the word index of piece p, -1 for ``[CLS]`` (the first piece) and ``[SEP]``.

Definitions (every choice of head, offset, tree decoder or k is made on the VAL split, SST dev, and
reported on TEST):

* word-level attention (:func:`word_attention`): attention *to* a split word is the sum over its pieces,
  attention *from* a split word the mean over its pieces; ``[CLS]``/``[SEP]`` leave the word matrix and
  their shares are returned beside it.
* relation accuracy (:func:`relation_tallies`): see :func:`predictions`; the sentence's root word (spaCy
  label ``ROOT``) has no head word and is left out of every row, "all" included.
* fixed offsets: "the head of word d is word d + k", k in +-1..+-12; a prediction outside the sentence is
  wrong. The same pair (d, h) is hit by offset k in both directions, so one offset row serves both.
* a head "finds" a relation (:func:`judge`) only where ``tools.stats.compare``, the repository's one rule
  (docs/statistics.md), finds it above the offset: a fixed model has no training randomness, so both cells are
  deterministic and only the test term counts; the tallies keep no per-word hits, so it is the unpaired binomial
  term of each accuracy on the n test words (``rule: unpaired``), at the two-sided 5% level.
* trees (:func:`max_arborescence`): Chu-Liu/Edmonds on word-level attention, root free (see there); the
  decoder's choices on the first ``--tree-val-sentences`` (300) dev sentences, since decoding every head
  in every mode is the cost (test is decoded in full).

The models: ``--model minilm`` (:class:`MiniLMAttention`: the pretrained all-MiniLM-L6-v2 on the complete
graph of its word pieces), ``--checkpoint RUN`` (:func:`checkpoint_attention_fn`: a train.py run of a
word-level attention model, dispatched on the checkpoint's model name), ``--model random`` (a fake).

    make pretrained_syntax                                        # both models -> docs/results/pretrained_syntax.md
    python -m studies.pretrained_syntax --model minilm --out docs/results --figures docs/figures
    python -m studies.pretrained_syntax --checkpoint outputs/RUN --name pretrained_syntax_scratch --out /tmp/ps
    python -m studies.pretrained_syntax --model random --max-sentences 50 --out /tmp/ps   # a fake model
    python -m studies.pretrained_syntax --report docs/results/pretrained_syntax.json \
        --beside docs/results/pretrained_syntax_scratch.json --md docs/results/pretrained_syntax.md  # md only
    python -m studies.pretrained_syntax --rejudge --report docs/results/pretrained_syntax.json \
        --beside docs/results/pretrained_syntax_scratch.json --beside docs/results/pretrained_syntax_finetuned.json \
        --md docs/results/pretrained_syntax.md --figures docs/figures   # no model: judge every row again
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from studies.attention_syntax import OFFSETS, sister_pairs
from tools.replay import Table

ALL = "all relations"
TREE_MODES = ("d2h", "h2d", "sym")  # dependent row -> head column | head row -> dependent column | their sum
TOP_KS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 36, 48, 72)
ROOT_NOTE = (
    "attention scores no root, so the decoder's root is free: a virtual ROOT node links to every word "
    "with one equal, very low weight, so the maximum arborescence uses exactly one root link and the root "
    "is the word whose tree scores best; UAS counts the root word right when it is the gold root"
)

AttentionFn = Callable[[list[str]], tuple[np.ndarray, list[int]]]


# ------------------------------------------------------------------------------------------------
# 1. pieces -> words
# ------------------------------------------------------------------------------------------------
def word_attention(A: np.ndarray, word_of_piece: Sequence[int], n_words: int):
    """``(W [..., n, n], to_cls [..., n], to_sep [..., n])`` from piece-level ``A [..., P, P]``.

    ``W[.., i, j]``: the attention from word i to word j = the mean over i's pieces (rows) of the sum over
    j's pieces (columns), Clark et al.'s convention. ``to_cls`` / ``to_sep``: the same for the ``[CLS]``
    and ``[SEP]`` columns (the -1 piece at position 0 is ``[CLS]``, every other -1 piece ``[SEP]``).
    Rows of W plus the two shares sum to what the piece rows summed to (1 for softmax attention)."""
    A = np.asarray(A, dtype=np.float64)
    wop = np.asarray(word_of_piece)
    P = len(wop)
    if A.shape[-2:] != (P, P):
        raise ValueError(f"attention is {A.shape[-2:]} per head but there are {P} pieces in word_of_piece")
    counts = np.bincount(wop[wop >= 0], minlength=n_words)
    if len(counts) != n_words or (counts == 0).any():
        raise ValueError(f"word_of_piece must give every word 0..{n_words - 1} at least one piece: {list(wop)}")
    member = np.zeros((P, n_words))
    member[np.flatnonzero(wop >= 0), wop[wop >= 0]] = 1.0
    mean_rows = member / counts  # (P, n): averages the rows of a word's pieces
    to_words = A @ member  # (..., P, n): summed over each word's pieces
    W = np.swapaxes(mean_rows, 0, 1) @ to_words
    special = np.flatnonzero(wop < 0)
    cls_cols = [p for p in special if p == 0]
    sep_cols = [p for p in special if p != 0]
    to_cls = np.swapaxes(mean_rows, 0, 1) @ A[..., cls_cols].sum(-1)[..., None]
    to_sep = np.swapaxes(mean_rows, 0, 1) @ A[..., sep_cols].sum(-1)[..., None]
    return W, to_cls[..., 0], to_sep[..., 0]


# ------------------------------------------------------------------------------------------------
# 2. relations, offsets, the choice rule
# ------------------------------------------------------------------------------------------------
def predictions(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(to_head, to_dependent)``, each ``[..., n]`` word indices, from word-level attention ``W [..., n, n]``.

    * dependent -> head: the predicted head of word d is ``argmax_{j != d} W[d, j]``, the other word d
      attends to most;
    * head -> dependent (Clark et al.'s "transpose" direction): the predicted head of word d is
      ``argmax_{j != d} W[j, d]``, the other word that attends most to d (column d of W). A head word
      with several dependents can so get all of them right.

    Self-attention is left out of both argmaxes and ``[CLS]``/``[SEP]`` are not words here; a tie goes to
    the leftmost word (numpy's argmax; float attention practically never ties). A one-word sentence
    predicts -1."""
    n = W.shape[-1]
    if n < 2:
        return np.full(W.shape[:-1], -1), np.full(W.shape[:-1], -1)
    masked = np.where(np.eye(n, dtype=bool), -np.inf, W)
    return masked.argmax(-1), masked.argmax(-2)


def relation_tallies(word_attns: Iterable[np.ndarray], sentences: Sequence[Mapping], offsets=OFFSETS) -> dict:
    """Hit counts per relation over a split: ``{relation: {"n", "to_head" [L, H], "to_dependent" [L, H],
    "offsets" [K]}}``, with the row ``ALL`` over every non-root word. ``word_attns[s]`` is sentence s's
    ``[L, H, n, n]``; ``sentences[s]`` has ``heads`` (-1 at the root) and ``deps`` (spaCy labels)."""
    out: dict[str, dict] = {}
    offsets = np.asarray(offsets)
    for W, sent in zip(word_attns, sentences):
        heads, deps = np.asarray(sent["heads"]), list(sent["deps"])
        if W.shape[-1] != len(heads):
            raise ValueError(f"attention covers {W.shape[-1]} words but the sentence has {len(heads)}")
        to_head, to_dep = predictions(W)
        for d, h in enumerate(heads):
            if h < 0:
                continue
            hit_head, hit_dep = to_head[..., d] == h, to_dep[..., d] == h
            hit_off = d + offsets == h
            for rel in (deps[d], ALL):
                t = out.get(rel)
                if t is None:
                    t = out[rel] = {
                        "n": 0,
                        "to_head": np.zeros(W.shape[:-2]),
                        "to_dependent": np.zeros(W.shape[:-2]),
                        "offsets": np.zeros(len(offsets)),
                    }
                t["n"] += 1
                t["to_head"] += hit_head
                t["to_dependent"] += hit_dep
                t["offsets"] += hit_off
    return out


def choose_on(val_scores: Mapping, test_scores: Mapping | Callable) -> tuple:
    """``(key, test_score, val_score)``: the candidate with the best VAL score (the first in order on a
    tie), reported with its TEST score. ``test_scores`` is a mapping over the same keys, or a function
    of the chosen key (for scores too costly to compute for every candidate). Test scores never enter
    the choice."""
    if not val_scores:
        raise ValueError("no candidates to choose from")
    if isinstance(test_scores, Mapping):
        missing = [k for k in val_scores if k not in test_scores]
        if missing:
            raise ValueError(f"candidates scored on val but not on test: {missing[:5]}")
    best = max(val_scores, key=lambda k: val_scores[k])  # max keeps the first maximal key
    test = test_scores[best] if isinstance(test_scores, Mapping) else test_scores(best)
    return best, test, val_scores[best]


def judge(acc: float, offset_acc: float, n: int) -> dict:
    """A head's accuracy against the offset's on the same n test words, by ``tools.stats.compare``: two
    deterministic cells (a fixed model's head and a fixed rule, no training randomness: only the test term
    counts). The tallies keep no per-word or per-sentence hits, so the test term is the unpaired binomial one of
    each accuracy on n words. Returns ``diff`` (head minus offset), ``noise`` (the threshold), ``verdict``,
    ``rule`` and ``finds`` (the rule finds the head above the offset)."""
    from tools.stats import Cell, compare

    v = compare(Cell([acc], n=n, deterministic=True), Cell([offset_acc], n=n, deterministic=True))
    return {"diff": v.diff, "noise": v.noise, "verdict": v.verdict, "rule": v.rule, "finds": v.verdict == "A higher"}


def finds(acc: float, offset_acc: float, n: int) -> bool:
    """A head finds a relation only where the rule (:func:`judge`) finds its accuracy above the offset's."""
    return judge(acc, offset_acc, n)["finds"]


def rejudge(r: dict) -> dict:
    """Every relation row (and the sister row) of one model's results judged again from its accuracies and n
    (:func:`judge`): what the table shows, whatever rule wrote the JSON. Changes ``r`` and returns it."""
    for row in r["relations"].values():
        row.update(judge(row["acc"], row["offset_acc"], row["n"]))
        row["finds_to_dependent"] = finds(row["to_dependent"]["acc"], row["offset_acc"], row["n"])
    if "sister" in r:
        s = r["sister"]
        s.update(judge(s["acc"], s["offset_acc"], s["n"]))
    return r


def _grid(acc: np.ndarray) -> dict:
    return {(ly, hd): float(acc[ly, hd]) for ly in range(acc.shape[0]) for hd in range(acc.shape[1])}


def head_name(key: tuple[int, int]) -> str:
    """``"layer-head"``, both 1-based (Clark et al.'s naming)."""
    return f"{key[0] + 1}-{key[1] + 1}"


def relation_table(val: dict, test: dict, min_n: int = 100, offsets=OFFSETS) -> dict:
    """The per-relation rows for every relation with at least ``min_n`` test words (and any on val): the
    best head per direction and the best offset, each chosen on val, with test accuracies."""
    rows = {}
    for rel, t in sorted(test.items(), key=lambda kv: -kv[1]["n"]):
        v = val.get(rel)
        if t["n"] < min_n or v is None or v["n"] == 0:
            continue
        row = {"n": t["n"], "n_val": v["n"], "chosen_on": "val"}
        for direction in ("to_head", "to_dependent"):
            key, acc, vacc = choose_on(_grid(v[direction] / v["n"]), _grid(t[direction] / t["n"]))
            row[direction] = {"head": head_name(key), "acc": acc, "val_acc": vacc}
        off = dict(zip(offsets, (t["offsets"] / t["n"]).tolist()))
        k, off_acc, off_val = choose_on(dict(zip(offsets, (v["offsets"] / v["n"]).tolist())), off)
        best = row["to_head"]
        row.update(head=best["head"], acc=best["acc"], offset=int(k), offset_acc=off_acc, offset_val_acc=off_val)
        row.update(judge(best["acc"], off_acc, t["n"]))  # diff, noise, verdict, rule, finds
        row["finds_to_dependent"] = finds(row["to_dependent"]["acc"], off_acc, t["n"])
        rows[rel] = row
    return rows


# ------------------------------------------------------------------------------------------------
# 4. trees
# ------------------------------------------------------------------------------------------------
def _find_cycle(head: np.ndarray, root: int):
    n = len(head)
    color = np.zeros(n, dtype=int)  # 0 new, 1 on the current path, 2 done
    for start in range(n):
        path, v = [], start
        while v != root and color[v] == 0:
            color[v] = 1
            path.append(v)
            v = head[v]
        if v != root and color[v] == 1:  # closed a cycle on this path
            return path[path.index(v) :]
        for u in path:
            color[u] = 2
    return None


def _edmonds(S: np.ndarray, root: int) -> np.ndarray:
    """Maximum arborescence rooted at ``root`` of the complete graph with arc weights ``S[d, h]`` (h -> d);
    ``head[root] = -1``. Chu-Liu/Edmonds by recursive contraction of cycles."""
    n = len(S)
    M = S.copy()
    np.fill_diagonal(M, -np.inf)
    head = M.argmax(1)
    head[root] = root
    cycle = _find_cycle(head, root)
    if cycle is None:
        head[root] = -1
        return head
    in_cycle = np.zeros(n, dtype=bool)
    in_cycle[cycle] = True
    rest = np.flatnonzero(~in_cycle)  # the contracted graph: rest nodes, then the cycle node c = len(rest)
    c = len(rest)
    S2 = np.full((c + 1, c + 1), -np.inf)
    S2[:c, :c] = S[np.ix_(rest, rest)]
    cyc = np.array(cycle)
    # entering the cycle at v from u: gain S[v, u] - S[v, head[v]] (v drops its cycle arc)
    gain = S[np.ix_(cyc, rest)] - S[cyc, head[cyc]][:, None]  # (|C|, |rest|)
    enter_at = gain.argmax(0)
    S2[c, :c] = gain.max(0)
    # leaving the cycle to w from its best node
    out = S[np.ix_(rest, cyc)]  # (|rest|, |C|)
    leave_from = out.argmax(1)
    S2[:c, c] = out.max(1)
    new_root = int(np.flatnonzero(rest == root)[0])
    h2 = _edmonds(S2, new_root)
    result = head.copy()
    for i, w in enumerate(rest):
        if w == root:
            result[w] = -1
        elif h2[i] == c:
            result[w] = cyc[leave_from[i]]
        else:
            result[w] = rest[h2[i]]
    u = h2[c]  # the contracted node's head, a rest node
    result[cyc[enter_at[u]]] = rest[u]
    return result


def max_arborescence(scores: np.ndarray) -> list[int]:
    """The maximum spanning arborescence over n words, ``scores[d, h]`` the weight of "h is d's head";
    returns each word's head, -1 at the root. Root handling: a virtual ROOT node links to every word with
    the same weight, lower than any tree's loss from dropping one arc, so exactly one word becomes root
    and it is the root whose tree scores best (the root itself is not scored by attention)."""
    S = np.asarray(scores, dtype=np.float64)
    n = len(S)
    if n == 0:
        return []
    if n == 1:
        return [-1]
    finite = S[~np.eye(n, dtype=bool)]
    low = finite.min() - (n + 1) * (finite.max() - finite.min() + 1.0)
    full = np.full((n + 1, n + 1), -np.inf)
    full[1:, 1:] = S
    full[1:, 0] = low
    head = _edmonds(full, 0)[1:]
    return [int(h) - 1 for h in head]  # ROOT (0) -> -1, word k+1 -> k


def tree_scores(W: np.ndarray, mode: str) -> np.ndarray:
    """Arc scores ``[d, h]`` from one word-level attention matrix: ``d2h`` the dependent's attention to the
    head (W), ``h2d`` the head's attention to the dependent (W transposed), ``sym`` their sum."""
    if mode == "d2h":
        return W
    if mode == "h2d":
        return np.swapaxes(W, -1, -2)
    if mode == "sym":
        return W + np.swapaxes(W, -1, -2)
    raise ValueError(f"unknown tree mode {mode!r}; valid: {', '.join(TREE_MODES)}")


def attachment(pred: Sequence[int], gold: Sequence[int]) -> tuple[int, int, int, int]:
    """``(uas_hits, words, uuas_hits, edges)``: words whose predicted head (-1 root) is the gold one, and
    gold undirected edges found in the predicted tree (both trees have n - 1 edges)."""
    undirected = lambda hs: {frozenset((d, h)) for d, h in enumerate(hs) if h >= 0}  # noqa: E731
    return (
        sum(int(p == g) for p, g in zip(pred, gold)),
        len(gold),
        len(undirected(pred) & undirected(gold)),
        sum(1 for g in gold if g >= 0),
    )


def right_branching(n: int) -> list[int]:
    """Every word heads the next: word 0 is the root, head(i) = i - 1 (the tree branches to the right)."""
    return [i - 1 for i in range(n)]


def left_branching(n: int) -> list[int]:
    """Every word heads the one before it: the last word is the root, head(i) = i + 1."""
    return [i + 1 if i + 1 < n else -1 for i in range(n)]


def random_tree(n: int, rng: np.random.Generator) -> list[int]:
    """A uniformly random labelled tree over n words (a random Pruefer sequence), rooted at a uniformly
    random word."""
    if n <= 1:
        return [-1] * n
    adj: list[set] = [set() for _ in range(n)]
    seq = list(rng.integers(0, n, size=n - 2))
    degree = np.ones(n, dtype=int)
    for v in seq:
        degree[v] += 1
    for v in seq:
        leaf = int(np.flatnonzero(degree == 1)[0])
        adj[leaf].add(int(v))
        adj[int(v)].add(leaf)
        degree[leaf] -= 1
        degree[v] -= 1
    u, w = np.flatnonzero(degree == 1)
    adj[u].add(int(w))
    adj[w].add(int(u))
    root = int(rng.integers(n))
    head, stack = [-2] * n, [root]
    head[root] = -1
    while stack:
        v = stack.pop()
        for k in adj[v]:
            if head[k] == -2:
                head[k] = v
                stack.append(k)
    return head


def _uas(trees: Iterable[Sequence[int]], sentences: Sequence[Mapping]) -> dict:
    tot = np.zeros(4)
    for pred, sent in zip(trees, sentences):
        tot += attachment(pred, sent["heads"])
    return {"uas": tot[0] / max(1, tot[1]), "uuas": tot[2] / max(1, tot[3]), "words": int(tot[1]), "edges": int(tot[3])}


def head_tree_uas(word_attns: Sequence[np.ndarray], sentences: Sequence[Mapping], modes=TREE_MODES) -> dict:
    """``{mode: {"uuas" [L, H], "uas" [L, H]}}``: every head's decoded trees scored against the parse."""
    L, H = word_attns[0].shape[:2]
    out = {m: np.zeros((4, L, H)) for m in modes}
    for W, sent in zip(word_attns, sentences):
        for m in modes:
            S = tree_scores(W, m)
            for ly in range(L):
                for hd in range(H):
                    out[m][:, ly, hd] += attachment(max_arborescence(S[ly, hd]), sent["heads"])
    return {m: {"uas": t[0] / max(1, t[1, 0, 0]), "uuas": t[2] / max(1, t[3, 0, 0])} for m, t in out.items()}


def choose_trees(
    val_attns,
    val_sents,
    test_attns,
    test_sents,
    modes=TREE_MODES,
    top_ks=TOP_KS,
    seed: int = 0,
    val_max: int | None = None,
) -> dict:
    """Trees decoded from attention, every choice on val by UUAS, UAS/UUAS on test:
    ``best_head``: the single (layer, head, mode); ``top_k``: for each mode, the mean word-level attention
    of the k heads with the best val UUAS in that mode, (mode, k) chosen on val; and the baselines.

    ``val_max``: make the choices on the first ``val_max`` val sentences only. Decoding is the cost
    (one Chu-Liu/Edmonds per sentence, head and mode: ~1 ms at 20 words, so 3 modes x 72 heads x all
    1,101 SST dev sentences take ~4 min on one free core); test is always decoded in full."""
    val_attns, val_sents = list(val_attns)[:val_max], list(val_sents)[:val_max]
    val = head_tree_uas(val_attns, val_sents, modes)
    L, H = val_attns[0].shape[:2]
    cands = {(m, ly, hd): float(val[m]["uuas"][ly, hd]) for m in modes for ly in range(L) for hd in range(H)}
    (m, ly, hd), test_best, best_val = choose_on(
        cands,
        lambda key: _uas((max_arborescence(tree_scores(W[key[1], key[2]], key[0])) for W in test_attns), test_sents),
    )
    out = {
        "chosen_on": "val",
        "val_sentences": len(val_sents),
        "modes": list(modes),
        "root": ROOT_NOTE,
        "best_head": {"head": head_name((ly, hd)), "mode": m, "val_uuas": best_val, **test_best},
    }
    ranked = {
        mode: sorted(((a, b) for a in range(L) for b in range(H)), key=lambda k: -val[mode]["uuas"][k])
        for mode in modes
    }
    ks = [k for k in top_ks if k <= L * H]

    def averaged(attns, mode, k):
        idx = ranked[mode][:k]
        rows, cols = [i for i, _ in idx], [j for _, j in idx]
        return (max_arborescence(tree_scores(W[rows, cols].mean(0), mode)) for W in attns)

    val_k = {(mode, k): _uas(averaged(val_attns, mode, k), val_sents)["uuas"] for mode in modes for k in ks}
    (mode, k), test_k, kval = choose_on(val_k, lambda key: _uas(averaged(test_attns, *key), test_sents))
    out["top_k"] = {
        "mode": mode,
        "k": k,
        "heads": [head_name(h) for h in ranked[mode][:k]],
        "val_uuas": kval,
        "val_uuas_by_k": {f"{md}/{kk}": v for (md, kk), v in val_k.items()},
        **test_k,
    }
    rng = np.random.default_rng(seed)
    out["baselines"] = {
        "right_branching": _uas((right_branching(len(s["heads"])) for s in test_sents), test_sents),
        "left_branching": _uas((left_branching(len(s["heads"])) for s in test_sents), test_sents),
        "random": {"seed": seed, **_uas((random_tree(len(s["heads"]), rng) for s in test_sents), test_sents)},
    }
    return out


# ------------------------------------------------------------------------------------------------
# 5. where attention goes
# ------------------------------------------------------------------------------------------------
def sink_tallies(A: np.ndarray, word_of_piece: Sequence[int]) -> np.ndarray:
    """``[L, 5]`` sums over heads and word pieces of one sentence's piece-level ``A [L, H, P, P]``: the
    attention to ``[CLS]``, to ``[SEP]``, to the piece itself, to other pieces, and the row count. Rows
    are the word pieces only (not ``[CLS]``/``[SEP]``), so the four shares are disjoint and sum to 1."""
    wop = np.asarray(word_of_piece)
    rows = np.flatnonzero(wop >= 0)
    seps = [p for p in np.flatnonzero(wop < 0) if p != 0]
    R = A[:, :, rows, :]  # (L, H, r, P)
    cls = R[..., 0].sum((1, 2)) if wop[0] < 0 else np.zeros(A.shape[0])
    sep = R[..., seps].sum((1, 2, 3))
    self_ = R[:, :, np.arange(len(rows)), rows].sum((1, 2))
    total = R.sum((1, 2, 3))
    return np.stack([cls, sep, self_, total - cls - sep - self_, np.full(A.shape[0], A.shape[1] * len(rows))], 1)


def sink_shares(tally: np.ndarray) -> list[dict]:
    """Per layer (1-based) the shares of attention to ``[CLS]``, ``[SEP]``, self and other pieces,
    averaged over heads and word pieces of the split."""
    return [
        {"layer": ly + 1, **{k: float(t[i] / t[4]) for i, k in enumerate(("cls", "sep", "self", "other"))}}
        for ly, t in enumerate(tally)
    ]


# ------------------------------------------------------------------------------------------------
# 6. the sister constituent in SST's gold tree
# ------------------------------------------------------------------------------------------------
def sister_tallies(word_attns, sentences, offsets=OFFSETS) -> dict:
    """Over a split, with studies/attention_syntax's sister constituent (:func:`sister_pairs` on the
    ``parent`` column): per head ``[L, H]`` the summed attention mass from each word onto its sister
    constituent, the hits of "the most-attended other word lies in it", the uniform-attention mass
    (sister size / sentence words), per offset the hits of "word i + k lies in it", and the word count."""
    out = None
    offsets = np.asarray(offsets)
    for W, sent in zip(word_attns, sentences):
        n = W.shape[-1]
        sisters: dict[int, list[int]] = {}
        for i, j in sister_pairs(sent["parent"], n):
            sisters.setdefault(i, []).append(j)
        if out is None:
            out = {
                "mass": np.zeros(W.shape[:-2]),
                "hits": np.zeros(W.shape[:-2]),
                "uniform": 0.0,
                "offsets": np.zeros(len(offsets)),
                "n": 0,
            }
        to_head, _ = predictions(W)
        for i, js in sisters.items():
            out["mass"] += W[..., i, js].sum(-1)
            out["hits"] += np.isin(to_head[..., i], js)
            out["uniform"] += len(js) / n
            out["offsets"] += np.isin(i + offsets, js)
            out["n"] += 1
    return out


def sister_table(val: dict, test: dict, offsets=OFFSETS) -> dict:
    """The head with the most val sister mass, the head with the best val sister accuracy and the best
    val offset, reported on test."""
    key, mass, vmass = choose_on(_grid(val["mass"] / val["n"]), _grid(test["mass"] / test["n"]))
    hkey, acc, vacc = choose_on(_grid(val["hits"] / val["n"]), _grid(test["hits"] / test["n"]))
    k, off_acc, voff = choose_on(
        dict(zip(offsets, (val["offsets"] / val["n"]).tolist())),
        dict(zip(offsets, (test["offsets"] / test["n"]).tolist())),
    )
    return {
        "n": test["n"],
        "chosen_on": "val",
        "mass_head": head_name(key),
        "mass": mass,
        "val_mass": vmass,
        "uniform_mass": test["uniform"] / test["n"],
        "acc_head": head_name(hkey),
        "acc": acc,
        "val_acc": vacc,
        "offset": int(k),
        "offset_acc": off_acc,
        **judge(acc, off_acc, test["n"]),  # diff, noise, verdict, rule, finds
    }


# ------------------------------------------------------------------------------------------------
# 7. the driver
# ------------------------------------------------------------------------------------------------
def _attentions(attention_fn: AttentionFn, sentences: Sequence[Mapping], chunk: int = 64):
    """``(A, word_of_piece)`` per sentence, in order; an ``attention_fn`` with a ``many(list of word
    lists)`` method (a batched model) is called on chunks of sentences, any other once per sentence."""
    many = getattr(attention_fn, "many", None)
    for start in range(0, len(sentences), chunk):
        part = [list(s["words"]) for s in sentences[start : start + chunk]]
        yield from (many(part) if many is not None else map(attention_fn, part))


def _run_split(attention_fn: AttentionFn, sentences: Sequence[Mapping]):
    """Word-level attention ``[L, H, n, n]`` (float32) per sentence and the split's sink tallies."""
    attns, sinks = [], None
    for sent, (A, wop) in zip(sentences, _attentions(attention_fn, sentences)):
        A = np.asarray(A, dtype=np.float64)
        if A.ndim != 4:
            raise ValueError(f"attention_fn must return A [layers, heads, pieces, pieces]; got shape {A.shape}")
        W, _, _ = word_attention(A, wop, len(sent["words"]))
        attns.append(W.astype(np.float32))
        t = sink_tallies(A, wop)
        sinks = t if sinks is None else sinks + t
    return attns, sinks


def analyse(
    attention_fn: AttentionFn,
    sentences_val: Sequence[Mapping],
    sentences_test: Sequence[Mapping],
    min_n: int = 100,
    offsets=OFFSETS,
    tree_modes=TREE_MODES,
    top_ks=TOP_KS,
    seed: int = 0,
    model: str = "",
    tree_val_sentences: int | None = None,
) -> dict:
    """The whole measurement. Sentences: ``{"words", "heads", "deps"}`` and, for the sister rows, ``parent``
    (SST's gold tree, :func:`load_sst`). Every choice on ``sentences_val``, every number on
    ``sentences_test``; the tree decoders' choices on the first ``tree_val_sentences`` val sentences
    (:func:`choose_trees`). Returns the json of docs/results/pretrained_syntax.json (see
    :func:`format_report`)."""
    val_attns, _ = _run_split(attention_fn, sentences_val)
    test_attns, test_sinks = _run_split(attention_fn, sentences_test)
    offsets = list(offsets)
    L, H = test_attns[0].shape[:2]
    rel_val = relation_tallies(val_attns, sentences_val, offsets)
    rel_test = relation_tallies(test_attns, sentences_test, offsets)
    out = {
        "model": model,
        "layers": L,
        "heads": H,
        "sentences": {"val": len(sentences_val), "test": len(sentences_test)},
        "chosen_on": "val",
        "reported_on": "test",
        "parse": "spaCy en_core_web_sm dependency parse of the treebank's tokens (Clark et al.: gold Stanford "
        "dependencies on WSJ); the root word is left out of every relation",
        "min_n": min_n,
        "offsets": offsets,
        "relations": relation_table(rel_val, rel_test, min_n, offsets),
        "per_head_test": {
            rel: {d: (t[d] / t["n"]).tolist() for d in ("to_head", "to_dependent")}
            for rel, t in rel_test.items()
            if t["n"] >= min_n
        },
        "trees": choose_trees(
            val_attns, sentences_val, test_attns, sentences_test, tree_modes, top_ks, seed, tree_val_sentences
        ),
        "attention_sinks": sink_shares(test_sinks),
    }
    if all("parent" in s for s in list(sentences_val) + list(sentences_test)):
        out["sister"] = sister_table(
            sister_tallies(val_attns, sentences_val, offsets),
            sister_tallies(test_attns, sentences_test, offsets),
            offsets,
        )
    return out


def format_report(r: dict) -> str:
    """The markdown table of the relations, the trees and the sinks."""
    lines = [
        f"{r['model']}: heads and offsets chosen on val ({r['sentences']['val']} sentences), "
        f"reported on test ({r['sentences']['test']}); {r['parse']}.",
        "",
        "| relation | n | best head (dep->head) | acc | best offset | acc | noise | finds | head->dep head | acc |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rel, row in r["relations"].items():
        td = row["to_dependent"]
        lines.append(
            f"| {rel} | {row['n']} | {row['head']} | {row['acc']:.1%} | {row['offset']:+d} | {row['offset_acc']:.1%} "
            f"| {row['noise']:.1%} | {'yes' if row['finds'] else 'no'} | {td['head']} | {td['acc']:.1%} |"
        )
    t = r["trees"]
    lines += ["", "| tree | UAS | UUAS |", "|---|---|---|"]
    lines.append(
        f"| best head {t['best_head']['head']} ({t['best_head']['mode']}) | {t['best_head']['uas']:.1%} "
        f"| {t['best_head']['uuas']:.1%} |"
    )
    lines.append(
        f"| mean of top {t['top_k']['k']} heads ({t['top_k']['mode']}) | {t['top_k']['uas']:.1%} "
        f"| {t['top_k']['uuas']:.1%} |"
    )
    for name, b in t["baselines"].items():
        lines.append(f"| {name.replace('_', '-')} | {b['uas']:.1%} | {b['uuas']:.1%} |")
    lines += ["", "| layer | [CLS] | [SEP] | self | other |", "|---|---|---|---|---|"]
    for s in r["attention_sinks"]:
        lines.append(f"| {s['layer']} | {s['cls']:.1%} | {s['sep']:.1%} | {s['self']:.1%} | {s['other']:.1%} |")
    if "sister" in r:
        s = r["sister"]
        lines += [
            "",
            f"sister constituent (gold tree, {s['n']} words): most mass head {s['mass_head']} {s['mass']:.1%} "
            f"(uniform {s['uniform_mass']:.1%}); best head {s['acc_head']} {s['acc']:.1%} vs offset "
            f"{s['offset']:+d} {s['offset_acc']:.1%} (noise {s['noise']:.1%})",
        ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# plots
# ------------------------------------------------------------------------------------------------
def plot_relations(r: dict, path: Path) -> Path:
    """Per relation: the best head's test accuracy (dependent -> head) beside the best offset's, the rule's
    threshold as an error bar on the offset; a star where the head finds the relation."""
    from tools.common import pyplot

    plt = pyplot()
    rels = list(r["relations"])
    x = np.arange(len(rels))
    head = [r["relations"][k]["acc"] for k in rels]
    off = [r["relations"][k]["offset_acc"] for k in rels]
    noise = [r["relations"][k]["noise"] for k in rels]
    fig, ax = plt.subplots(figsize=(max(5, 0.55 * len(rels) + 2), 3.6))
    ax.bar(x - 0.2, head, 0.4, label="best head (chosen on val)")
    ax.bar(x + 0.2, off, 0.4, yerr=noise, capsize=2, label="best offset (chosen on val) ± the rule's threshold")
    for i, k in enumerate(rels):
        label = f"{r['relations'][k]['head']}\n{r['relations'][k]['offset']:+d}"
        ax.text(
            x[i],
            max(head[i], off[i]) + 0.04,
            ("* " if r["relations"][k]["finds"] else "") + label,
            ha="center",
            fontsize=6,
        )
    ax.set_xticks(x, [f"{k}\n(n={r['relations'][k]['n']})" for k in rels], fontsize=7)
    ax.set(ylim=(0, 1.15), ylabel="test accuracy")
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(f"{r['model']}: most-attended word = dependency head (* found by the rule)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_sentence(
    r: dict, attention_fn: AttentionFn, sentence: Mapping, path: Path, relations=("det", "nsubj", "dobj")
) -> Path:
    """One sentence: its dependency arcs above the words, and below them, per relation, the attention of
    that relation's best head (dependent -> head, chosen on val) from each word, line width ~ weight."""
    from tools.common import pyplot

    plt = pyplot()
    rels = [k for k in relations if k in r["relations"]]
    A, wop = attention_fn(list(sentence["words"]))
    W, _, _ = word_attention(np.asarray(A, dtype=np.float64), wop, len(sentence["words"]))
    words, heads = sentence["words"], sentence["heads"]
    fig, axes = plt.subplots(len(rels) + 1, 1, figsize=(max(6, 0.6 * len(words)), 1.6 * (len(rels) + 1)))
    axes = np.atleast_1d(axes)

    def arc(ax, a, b, weight, color, up=True):
        t = np.linspace(0, np.pi, 30)
        mid, rad = (a + b) / 2, abs(b - a) / 2
        y = np.sin(t) * (0.3 + 0.1 * rad) * (1 if up else -1)
        ax.plot(mid + rad * np.cos(t), y, color=color, lw=0.3 + 3 * weight, alpha=min(1.0, 0.2 + weight))

    for ax in axes:
        ax.set_xticks(range(len(words)), words, fontsize=7, rotation=30)
        ax.set_yticks([])
        ax.set_xlim(-0.5, len(words) - 0.5)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
    for d, h in enumerate(heads):
        if h >= 0:
            arc(axes[0], d, h, 0.5, "k")
            axes[0].text((d + h) / 2, 0.05, sentence["deps"][d], fontsize=6, ha="center")
    axes[0].set_title("spaCy dependency arcs", fontsize=8)
    for ax, rel in zip(axes[1:], rels):
        ly, hd = (int(v) - 1 for v in r["relations"][rel]["head"].split("-"))
        for d in range(len(words)):
            for j in range(len(words)):
                if j != d and W[ly, hd, d, j] > 0.05:
                    gold = heads[d] == j and sentence["deps"][d] == rel
                    arc(ax, d, j, float(W[ly, hd, d, j]), "tab:red" if gold else "tab:blue", up=False)
        ax.set_title(f"{rel}: head {r['relations'][rel]['head']} (red: a gold {rel} arc)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------------
# data and the command
# ------------------------------------------------------------------------------------------------
def load_sst(data_dir: str | Path, split: str, nlp=None, max_sentences: int | None = None) -> list[dict]:
    """SST's ``dev``/``test`` trees as ``{"words", "heads", "deps", "parent"}``: the treebank's tokens
    (PTB escapes undone, as data/text.py feeds them to the parser), spaCy's parse of them as given, and
    the gold constituency tree."""
    from spacy.tokens import Doc

    from data.corpora import read_sst
    from data.text import LOCAL_FILES, load_parser, unescape_ptb

    files = LOCAL_FILES["sst"]
    if split not in files:
        raise ValueError(f"unknown split {split!r}; valid: {', '.join(files)}")
    trees = read_sst(Path(data_dir) / files[split])[:max_sentences]
    nlp = nlp or load_parser()
    words = [[unescape_ptb(t) for t in tree["tokens"]] for tree in trees]
    out = []
    for tree, ws, doc in zip(trees, words, nlp.pipe(Doc(nlp.vocab, words=w) for w in words)):
        heads = [-1 if t.head.i == t.i else t.head.i for t in doc]
        out.append({"words": ws, "heads": heads, "deps": [t.dep_ for t in doc], "parent": tree["parent"]})
    return out


def random_attention_fn(layers: int = 2, heads: int = 3, seed: int = 0) -> AttentionFn:
    """A stand-in model for development: words of more than 4 characters split into two pieces,
    ``[CLS]``/``[SEP]`` around them, attention rows drawn from a Dirichlet (row-stochastic), seeded by
    the sentence."""

    def fn(words: list[str]):
        wop = [-1] + [w for w, word in enumerate(words) for _ in range(1 + (len(word) > 4))] + [-1]
        rng = np.random.default_rng([seed, len(words), sum(map(len, words))])
        A = rng.dirichlet(np.ones(len(wop)), size=(layers, heads, len(wop)))
        return A, wop

    return fn


class MiniLMAttention:
    """all-MiniLM-L6-v2 (``models/minilm.py``, the pretrained weights, hash-checked) as an ``attention_fn``:
    each sentence's words -> WordPiece ``[CLS] pieces [SEP]`` on the complete piece graph (full BERT
    attention), eval mode, no gradients, the dense twin on a padded batch (``many``: one forward per
    batch; the dense attention is HF BertModel's, tests/models/test_minilm.py). Returns ``A [6, 12, P, P]``.

    A sentence longer than the model's 254 word pieces, or a word WordPiece gives no piece, is an error:
    the analysis needs every word (SST's longest sentence has well under 254 pieces)."""

    name = "all-MiniLM-L6-v2 (pretrained)"

    def __init__(self, model=None, wordpiece=None):
        from models.minilm import build_minilm, load_wordpiece

        self.model = (model if model is not None else build_minilm({}, None)).eval()
        self.wordpiece = wordpiece if wordpiece is not None else load_wordpiece()

    def many(self, sentences: Sequence[Sequence[str]]) -> list[tuple[np.ndarray, list[int]]]:
        import dgl
        import torch

        from data.wordpiece import piece_graph

        pieces = [self.wordpiece.pieces(list(words)) for words in sentences]
        for words, p in zip(sentences, pieces):
            missing = sorted(set(range(len(words))) - set(p.word))
            if p.truncated or missing:
                raise ValueError(
                    f"{' '.join(words)[:60]!r}: "
                    + (
                        f"{p.truncated} pieces cut at the model's limit"
                        if p.truncated
                        else f"words {missing} have no piece"
                    )
                    + ": the analysis needs every word"
                )
        g = dgl.batch([piece_graph(p, "complete") for p in pieces])
        with torch.no_grad():
            _, weights, _ = self.model.trace(g, "dense")  # 6 x (B, H, n, n), row = the attending piece
        A = torch.stack(weights, 1).double().numpy()  # (B, L, H, n, n)
        return [(A[b, :, :, : len(p), : len(p)], list(p.word)) for b, p in enumerate(pieces)]

    def __call__(self, words: Sequence[str]):
        return self.many([words])[0]


class WordModelAttention:
    """A from-scratch attention model trained by train.py (``transformer``, ``gat``) as an ``attention_fn``:
    it attends over words directly, so ``word_of_piece`` is the identity and there are no ``[CLS]``/``[SEP]``
    pieces (a ``model.readout=cls`` model's ``<cls>`` node is put first and counted as ``[CLS]``). Words
    are lower-cased as its dataset was; words it never saw in training are ``<unk>``, as when it was
    evaluated. Graphs that need a tree or add phrase nodes are refused: the analysis gives words only."""

    def __init__(self, run):
        from studies.attention_syntax import record_attention

        self.run = run
        self.model = run.model.eval()
        if getattr(self.model, "dynamic", False):
            raise ValueError("graph=knn rebuilds its edges in every layer; analyse a model trained on a fixed graph")
        self.model.impl = "sparse"  # the weights come per edge
        self.records = record_attention(self.model)
        self.lower = bool(run.config["dataset"].get("lowercase"))
        cfg = run.config
        self.name = f"from scratch: {cfg['model']['name']} on graph={cfg['graph']['name']} ({run.path})"

    def many(self, sentences: Sequence[Sequence[str]]) -> list[tuple[np.ndarray, list[int]]]:
        import dgl
        import torch

        graphs = []
        for words in sentences:
            ids = self.run.vocab.encode([w.lower() if self.lower else w for w in words])
            g = self.run.construction(ids, None, None)
            extra = g.num_nodes() - len(words) - int(self.run.construction.cls_id is not None)
            if extra:
                raise ValueError(
                    f"graph={self.run.construction.name} adds {extra} nodes that are no words: analyse a model "
                    "trained on graph=complete, window or none"
                )
            graphs.append(g)
        g = dgl.batch(graphs)
        self.records.clear()
        with torch.no_grad():
            self.model(g)
        attn = torch.stack(list(self.records), 0).double()  # (L, E, H), edge j -> i holds a_ij
        self.records.clear()
        src, dst = g.edges()
        node_start = torch.cumsum(g.batch_num_nodes(), 0) - g.batch_num_nodes()
        edge_end = torch.cumsum(g.batch_num_edges(), 0)
        out, e0 = [], 0
        for b, words in enumerate(sentences):
            n, e1, start = g.batch_num_nodes()[b].item(), edge_end[b].item(), node_start[b].item()
            has_cls = n > len(words)
            order = (torch.arange(n) + int(has_cls)) % n  # node k -> row k (+1 with <cls> last, which goes to 0)
            s, d = order[src[e0:e1] - start], order[dst[e0:e1] - start]
            A = torch.zeros(attn.shape[0], attn.shape[2], n, n, dtype=torch.float64)
            A[:, :, d, s] = attn[:, e0:e1].permute(0, 2, 1)
            out.append((A.numpy(), ([-1] if has_cls else []) + list(range(len(words)))))
            e0 = e1
        return out

    def __call__(self, words: Sequence[str]):
        return self.many([words])[0]


WORD_LEVEL_FAMILIES = ("transformer", "gat")  # train.py's models with attention weights per edge


def checkpoint_attention_fn(path: str | Path):
    """The ``attention_fn`` of a train.py run directory or checkpoint, by the checkpoint's model name."""
    from engine.checkpoint import load_checkpoint
    from tools.common import Run, find_checkpoint

    ckpt = load_checkpoint(find_checkpoint(path))
    name = ckpt["config"]["model"]["name"]
    if name == "minilm":
        return fine_tuned_minilm(ckpt, path)
    if name not in WORD_LEVEL_FAMILIES:
        raise ValueError(f"{path}: model={name} has no attention to analyse; valid: {', '.join(WORD_LEVEL_FAMILIES)}")
    return WordModelAttention(Run.load(path))


def fine_tuned_minilm(ckpt: dict, path: str | Path) -> MiniLMAttention:
    """A train.py ``model=minilm`` checkpoint (fine-tuned all-MiniLM-L6-v2) as an ``attention_fn``: its weights
    (the classifier head aside) on the complete piece graph, as ``--model minilm`` runs the pretrained ones.
    Only a model fine-tuned on graph=complete: on another graph its heads never saw the pairs it lacks."""
    from engine.checkpoint import load_model

    model, _, construction, config = load_model(ckpt, path)
    graph = config["graph"]["name"]
    if graph != "complete":
        raise ValueError(
            f"{path}: fine-tuned on graph={graph}; the analysis reads full attention: use a run with graph=complete"
        )
    fn = MiniLMAttention(model=model, wordpiece=construction.wordpiece)
    fn.name = f"all-MiniLM-L6-v2 fine-tuned on {config['dataset']['name']} (graph=complete, {path})"
    fn.fine_tuned = True
    return fn


def model_attention_fn(name: str) -> AttentionFn:
    if name == "random":
        return random_attention_fn(layers=6, heads=12)
    if name == "minilm":
        return MiniLMAttention()
    raise ValueError(f"unknown --model {name!r}; valid: minilm, random (or --checkpoint RUN for a train.py model)")


CLARK = {  # Clark et al. (2019), BERT-base on WSJ, gold Stanford dependencies: best head, best offset (%)
    "det": (94.3, 51.7),
    "dobj": (86.8, 40.0),
    "pobj": (76.3, 34.6),
    "poss": (80.5, 47.7),
    "amod": (75.6, 68.3),
    "aux": (81.1, 71.5),
    "nsubj": (58.5, 45.5),
    ALL: (34.5, 26.3),
}
NOT_RUN = "not run yet: analyse a train.py model=minilm graph=complete run with --checkpoint RUN"


def example_sentence(sentences: Sequence[Mapping], relations=("det", "nsubj", "dobj")) -> Mapping:
    """The first sentence of 8-14 words with every one of ``relations`` (else the first of 8-14 words)."""
    fits = [s for s in sentences if 8 <= len(s["words"]) <= 14]
    return next((s for s in fits if set(relations) <= set(s["deps"])), fits[0] if fits else sentences[0])


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _summary(main_r: dict, others: Sequence[dict]) -> list[str]:
    """The page's reading of the numbers, every number taken from the results."""
    rows = dict(sorted(main_r["relations"].items(), key=lambda kv: -kv[1]["n"]))

    def cmp(rel):
        row = rows[rel]
        head, off = CLARK[rel]
        return (
            f"{rel} {_pct(row['acc'])} vs offset {_pct(row['offset_acc'])} (noise {_pct(row['noise'])}; "
            f"Clark {head:.1f} vs {off:.1f})"
        )

    anchored = [rel for rel in CLARK if rel in rows]
    found = [rel for rel in anchored if rows[rel]["finds"]]
    missed = [rel for rel in anchored if not rows[rel]["finds"]]
    below = [rel for rel in anchored if rows[rel]["acc"] < CLARK[rel][0] / 100]
    sinks = main_r["attention_sinks"]
    top_cls = max(sinks, key=lambda s: s["cls"])
    out = [
        "Reading (Clark et al.'s relations): "
        + ("a head finds " + "; ".join(cmp(r) for r in found) + ". " if found else "")
        + ("The rule finds no head above the offset for " + "; ".join(cmp(r) for r in missed) + ". " if missed else "")
        + f"{len(below)} of these {len(anchored)} rows score below BERT-base's best head"
        + (f" ({', '.join(below)})." if below else "."),
        "",
        f"Attention sinks: MiniLM's word pieces send {_pct(min(s['cls'] for s in sinks[1:]))}-"
        f"{_pct(top_cls['cls'])}% of their attention to `[CLS]` in layers 2-{len(sinks)} "
        f"(most in layer {top_cls['layer']}) and at most {_pct(max(s['sep'] for s in sinks))}% to `[SEP]`: "
        "the sink is `[CLS]` here, where Clark et al. found `[SEP]` in BERT-base.",
    ]
    for r in others:
        rr = r["relations"]
        beaten = sum(1 for row in rr.values() if row["acc"] < row["offset_acc"])
        out += [
            "",
            f"{r.get('label', r['model'])} ({r['model']}): its best head is below the best offset on {beaten} of "
            f"{len(rr)} relations ({ALL}: {_pct(rr[ALL]['acc'])} vs {_pct(rr[ALL]['offset_acc'])}); its trees "
            f"score UUAS {_pct(r['trees']['best_head']['uuas'])} against a random tree's "
            f"{_pct(r['trees']['baselines']['random']['uuas'])}.",
        ]
    return out


def _label(r: dict) -> str:
    return r.get("label", r["model"])


def _introduction(main_r: dict, others: list[dict]) -> list[str]:
    """The title, the commands that made the page, their wall time and what is measured how."""
    cmds = "\n".join(r.get("command", "") for r in others) + "\n" + main_r.get("command", "")
    return [
        "# Which heads of a pretrained Transformer find the parse?",
        "",
        "Clark et al. (2019), *What Does BERT Look At?*, measured on SST. Produced by `make pretrained_syntax`:",
        "",
        "```",
        cmds.strip(),
        "```",
        "",
        "Wall time of each analysis (one thread, 2 cores): "
        + ", ".join(f"{_label(r)} {r['seconds']:.0f} s" for r in [main_r, *others] if "seconds" in r)
        + ". `make pretrained_syntax` first trains the from-scratch model if `SYNTAX_RUN` holds no checkpoint: "
        "`python train.py experiment=sst graph=complete model=transformer seed=0 logger=none "
        "hydra.run.dir=outputs/pretrained_syntax/sst_transformer_complete` (SST-5, 10 epochs, best epoch on dev).",
        "",
        f"- Model: {main_r['model']}; {main_r['layers']} layers x {main_r['heads']} heads, full attention over "
        "`[CLS] pieces [SEP]`; word-level attention by Clark et al.'s rule (attention *to* a split word summed "
        "over its pieces, *from* it averaged).",
        "- Parse: spaCy's `en_core_web_sm` dependency parse of the treebank's own tokens (the root word is left "
        "out of every row). Clark et al. used gold Stanford dependencies on the WSJ, so their BERT-base numbers "
        "(beside, as anchors) are not the same measurement: other text, other parses, a 12-layer model.",
        f"- Every choice (head, offset, tree decoder, k) on SST dev ({main_r['sentences']['val']} sentences), "
        f"every number on SST test ({main_r['sentences']['test']} sentences): `chosen_on: val` in the json.",
        "- Accuracy: how often the most-attended other word (dependent -> head) is the word's dependency head. "
        "Offset: the best fixed offset 'the head is word i + k'. A head **finds** a relation only where "
        "`tools.stats.compare`, the rule of [docs/statistics.md](../statistics.md), finds it above the offset: "
        "a fixed model and a fixed rule have no training randomness (deterministic cells), so only the test term "
        "counts, and with no per-word hits kept it is the unpaired binomial term of each accuracy on the n test "
        "words (`rule`: unpaired), at the two-sided 5% level; `noise` is that threshold.",
        "",
    ]


def _relations(main_r: dict, others: list[dict], rel_rows: dict) -> list[str]:
    """The pretrained encoder's best head against the best offset per relation, and the page's reading."""
    lines = [
        "## Relations: the best head against the best offset",
        "",
        "| relation | n (test) | Clark BERT-base: head / offset | best head | acc | best offset | offset acc "
        "| noise | finds | rule | head->dep: head | acc |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rel, row in rel_rows.items():
        clark = " / ".join(f"{v:.1f}" for v in CLARK[rel]) if rel in CLARK else ""
        td = row["to_dependent"]
        lines.append(
            f"| {rel} | {row['n']} | {clark} | {row['head']} | {_pct(row['acc'])} | {row['offset']:+d} "
            f"| {_pct(row['offset_acc'])} | {_pct(row['noise'])} | {'**yes**' if row['finds'] else 'no'} "
            f"| {row['rule']} | {td['head']} | {_pct(td['acc'])} |"
        )
    found = [rel for rel, row in rel_rows.items() if row["finds"]]
    return lines + [
        "",
        f"Found (the head above the offset by the rule): {', '.join(found) if found else 'none'}.",
        "",
        *_summary(main_r, others),
        "",
        "![best head vs best offset per relation](../figures/pretrained_syntax_relations.png)",
        "",
        "![one test sentence: the best det, nsubj and dobj heads over its dependency arcs]"
        "(../figures/pretrained_syntax_example.png)",
        "",
    ]


def _before_after(main_r: dict, others: list[dict], rel_rows: dict, tuned: dict | None, fine_tuned: str) -> list[str]:
    """Each model's best head per relation, the fine-tuned MiniLM last (or ``fine_tuned`` where not run)."""
    header = "| relation | Clark head | best offset | pretrained MiniLM |"
    sep = "|---|---|---|---|"
    for r in others:
        if r is not tuned:
            header += f" {_label(r)} |"
            sep += "---|"
    lines = [
        "## Before and after: the same table for other encoders",
        "",
        "Test accuracy of each model's best head (chosen on dev); the offset column is the same for every model "
        "(it reads positions only).",
        "",
        header + " fine-tuned MiniLM |",
        sep + "---|",
    ]
    for rel, row in rel_rows.items():
        cells = [rel, f"{CLARK[rel][0]:.1f}" if rel in CLARK else "", _pct(row["offset_acc"])]
        for r in [main_r, *[o for o in others if o is not tuned], *([tuned] if tuned else [])]:
            o = r["relations"].get(rel)
            cells.append("–" if o is None else f"{_pct(o['acc'])} ({o['head']}{', finds' if o['finds'] else ''})")
        if tuned is None:
            cells.append(fine_tuned if rel == next(iter(rel_rows)) else "")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


TREE_ROWS = (
    ("best_head", "best single head"),
    ("top_k", "mean of the top-k heads"),
    ("right_branching", "right-branching"),
    ("left_branching", "left-branching"),
    ("random", "random tree (seed 0)"),
)


def _tree_cell(r: dict, key: str) -> str:
    t = r["trees"]
    if key == "best_head":
        b = t["best_head"]
        return f"UUAS {_pct(b['uuas'])}, UAS {_pct(b['uas'])} (head {b['head']}, {b['mode']})"
    if key == "top_k":
        b = t["top_k"]
        return f"UUAS {_pct(b['uuas'])}, UAS {_pct(b['uas'])} (mean of {b['k']} heads, {b['mode']})"
    b = t["baselines"][key]
    return f"UUAS {_pct(b['uuas'])}, UAS {_pct(b['uas'])}"


def _trees(main_r: dict, others: list[dict]) -> list[str]:
    """The trees decoded from attention against the branching and random baselines."""
    t0, models = main_r["trees"], [main_r, *others]
    lines = [
        "",
        "## Trees out of attention (Chu-Liu/Edmonds), test",
        "",
        f"Decoder mode (d2h: the dependent's attention to its head; h2d: the transpose; sym: their sum), head and "
        f"k chosen by dev UUAS on the first {t0['val_sentences']} dev sentences (to bound the decoding time: every "
        f"head x mode is decoded per sentence); test decoded in full. {t0['root']}.",
        "",
        "| tree | " + " | ".join(_label(r) for r in models) + " |",
        "|---" * (1 + 1 + len(others)) + "|",
    ]
    lines += [f"| {label} | " + " | ".join(_tree_cell(r, key) for r in models) + " |" for key, label in TREE_ROWS]
    return lines + [
        "",
        "Right- and left-branching trees are the same chain undirected, hence the same UUAS. "
        "Anchors: Clark et al. report right-branching UAS 26 on WSJ; Hewitt & Manning's structural probe (a "
        "trained projection, not raw attention) reaches UUAS ~80 on BERT-base layer 7.",
        "",
    ]


def _sinks(main_r: dict, others: list[dict]) -> list[str]:
    """Where each layer's attention goes: [CLS], [SEP], the piece itself, the other pieces."""
    lines = [
        "## Where attention goes, per layer (test; shares of the attention of word pieces, averaged over heads)",
        "",
        "| layer | [CLS] | [SEP] | self | other pieces |" + "".join(f" {_label(r)}: self | other |" for r in others),
        "|---|---|---|---|---|" + "---|---|" * len(others),
    ]
    for i, s in enumerate(main_r["attention_sinks"]):
        cells = [str(s["layer"]), _pct(s["cls"]), _pct(s["sep"]), _pct(s["self"]), _pct(s["other"])]
        for r in others:
            o = r["attention_sinks"][i] if i < len(r["attention_sinks"]) else None
            cells += [_pct(o["self"]), _pct(o["other"])] if o else ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + ["", "Clark et al.: more than half of BERT-base's attention in layers 6-10 goes to `[SEP]`.", ""]


def _sister(models: list[dict]) -> list[str]:
    """The attention onto the sister constituent of SST's gold tree, per model that measured it."""
    lines = [
        "## The sister constituent in SST's gold tree (test)",
        "",
        "The attention mass from each word onto its sister constituent (`studies/attention_syntax`'s "
        "definition), and how often the most-attended other word lies in it.",
        "",
        "| model | words | most-mass head | mass | uniform mass | best head | acc | best offset | offset acc "
        "| noise | finds | rule |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in models:
        s = r.get("sister")
        if s:
            lines.append(
                f"| {_label(r)} | {s['n']} | {s['mass_head']} | {_pct(s['mass'])} "
                f"| {_pct(s['uniform_mass'])} | {s['acc_head']} | {_pct(s['acc'])} | {s['offset']:+d} "
                f"| {_pct(s['offset_acc'])} | {_pct(s['noise'])} | {'**yes**' if s['finds'] else 'no'} | {s['rule']} |"
            )
    return lines + [""]


def markdown(results: Sequence[dict], fine_tuned: str = NOT_RUN) -> str:
    """docs/results/pretrained_syntax.md from the json of each model (the first: the pretrained encoder). A
    json with ``fine_tuned`` (``--checkpoint`` of a train.py ``model=minilm`` run) fills the fine-tuned column.
    Every row is judged again (:func:`rejudge`, on copies): the table is the rule's verdict on the numbers."""
    import copy

    results = [rejudge(copy.deepcopy(r)) for r in results]
    main_r, others = results[0], list(results[1:])
    tuned = next((r for r in others if r.get("fine_tuned")), None)
    rel_rows = dict(sorted(main_r["relations"].items(), key=lambda kv: -kv[1]["n"]))  # json keys come sorted
    lines = [
        *_introduction(main_r, others),
        *_relations(main_r, others, rel_rows),
        *_before_after(main_r, others, rel_rows, tuned, fine_tuned),
        *_trees(main_r, others),
        *_sinks(main_r, others),
        *(_sister([main_r, *others]) if "sister" in main_r else []),
        f"Fine-tuned MiniLM: {tuned['model'] if tuned else fine_tuned}.",
    ]
    return "\n".join(lines) + "\n"


def replay_table(*results: dict) -> str:
    """``docs/results/pretrained_syntax.md`` from its three JSON files (``tools.check_docs`` replays it)."""
    return markdown(list(results))


# the table tools.check_docs replays
REPLAYS = [
    Table(
        "docs/results/pretrained_syntax.md",
        tuple(f"docs/results/pretrained_syntax{s}.json" for s in ("", "_scratch", "_finetuned")),
        replay_table,
        "studies.pretrained_syntax.markdown",
    )
]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="random", help="minilm (the pretrained weights) | random (a fake model)")
    parser.add_argument("--checkpoint", help="a train.py run directory or .pt file (overrides --model)")
    parser.add_argument("--label", help="the model's column name in the markdown (default: from the model)")
    parser.add_argument("--data-dir", default="../shared/data/sst", help="the folder with SST's dev.txt and test.txt")
    parser.add_argument("--max-sentences", type=int, default=None, help="per split (default: all)")
    parser.add_argument("--min-n", type=int, default=100, help="relations with at least this many test words")
    parser.add_argument(
        "--tree-val-sentences", type=int, default=300, help="tree choices on this many dev sentences (0: all)"
    )
    parser.add_argument(
        "--out",
        default="outputs/pretrained_syntax",
        help="where NAME.json goes (default outputs/pretrained_syntax; make pretrained_syntax writes docs/results)",
    )
    parser.add_argument("--figures", help="where NAME_relations.png and NAME_example.png go (default: --out)")
    parser.add_argument("--name", default="pretrained_syntax", help="the file stem of the json and figures")
    parser.add_argument("--report", help="skip the analysis: write --md from this json (and --beside jsons)")
    parser.add_argument("--beside", action="append", default=[], help="another model's json, a column beside")
    parser.add_argument("--md", help="write the markdown report here")
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="with --report: judge every row of --report and --beside again (no model) and write them back; "
        "with --figures, draw their relation figures again",
    )
    args = parser.parse_args(argv)
    try:
        from engine.io import write_json

        if args.rejudge and not args.report:
            raise ValueError("--rejudge judges committed JSON again: name it with --report (and --beside)")
        committed = (Path(__file__).resolve().parents[2] / "docs" / "results").resolve()
        if args.md and not args.report and Path(args.out).resolve() != committed:
            if Path(args.md).resolve().is_relative_to(committed):
                raise ValueError(
                    f"--md {args.md} would draw a committed page from an analysis saved to {args.out}: "
                    "add --out docs/results (as make pretrained_syntax does) or write the markdown elsewhere"
                )
        if args.report:
            results = [json.loads(Path(p).read_text()) for p in [args.report, *args.beside]]
            if args.rejudge:
                for path, result in zip([args.report, *args.beside], results):
                    write_json(path, rejudge(result))
                    print(f"judged {path} again by tools.stats.compare")
                    if args.figures:
                        print(
                            f"saved {plot_relations(result, Path(args.figures) / f'{Path(path).stem}_relations.png')}"
                        )
        else:
            import time

            start = time.perf_counter()
            fn = checkpoint_attention_fn(args.checkpoint) if args.checkpoint else model_attention_fn(args.model)
            val, test = (load_sst(args.data_dir, s, max_sentences=args.max_sentences) for s in ("val", "test"))
            result = analyse(
                fn,
                val,
                test,
                min_n=args.min_n,
                model=getattr(fn, "name", args.model),
                tree_val_sentences=args.tree_val_sentences or None,
            )
            result["label"] = args.label or ("pretrained MiniLM" if args.model == "minilm" else result["model"])
            if getattr(fn, "fine_tuned", False):
                result["fine_tuned"] = True
            result["command"] = "python -m studies.pretrained_syntax " + shlex.join(argv)
            result["seconds"] = round(time.perf_counter() - start, 1)
            out = Path(args.out)
            figures = Path(args.figures or args.out)
            out.mkdir(parents=True, exist_ok=True)
            figures.mkdir(parents=True, exist_ok=True)
            write_json(out / f"{args.name}.json", result)
            print(format_report(result))
            print(f"saved {out / f'{args.name}.json'} ({result['seconds']} s)")
            print(f"saved {plot_relations(result, figures / f'{args.name}_relations.png')}")
            example = example_sentence(test)
            print(f"saved {plot_sentence(result, fn, example, figures / f'{args.name}_example.png')}")
            results = [result] + [json.loads(Path(p).read_text()) for p in args.beside]
        if args.md:
            Path(args.md).parent.mkdir(parents=True, exist_ok=True)
            Path(args.md).write_text(markdown(results))
            print(f"saved {args.md}")
    except (ValueError, OSError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
