"""The pretrained MiniLM, frozen, run on every graph: how far does the graph move its sentence embeddings,
and what does a linear probe read from them?

    python -m studies.graph_probe --datasets sst_binary --graphs complete,dep,tree,window,bpt,none

The same all-MiniLM-L6-v2 weights, with no training, embed every sentence of each split on each graph
over the WordPiece tokens (``data/wordpiece.py`` lifts the word-level graph; the embedding is the
mean-pooled, L2-normalised one of ``tools.embed``). Then, per graph:

  (a) **cosine to the complete graph's embedding**, per test sentence: its mean and percentiles. The
      complete graph is the model as trained; 1.0 means the graph changed nothing.
  (b) **a frozen probe**: multinomial logistic regression (torch, full batch L-BFGS) on the train
      embeddings (standardised with the train mean and std), its L2 strength chosen on dev from a small
      grid (the best dev accuracy; ties go to the stronger L2), and the chosen probe's test accuracy,
      with its binomial error bar 2·sqrt(p(1-p)/n) on n sentences (an error bar, not a test).
  (c) **test accuracy against the complete graph's**, judged by ``tools.stats.compare`` (the repository's one
      rule, docs/statistics.md): embeddings and probe are deterministic (no seeds), so both cells are
      ``deterministic=True`` and only the test term counts, paired over the test sentences (each probe's
      per-sentence right/wrong, ``test_correct``).

Datasets: ``sst_binary`` (the treebank's own train/dev/test files with neutral roots dropped:
6,920/872/1,821; the words are the treebank's tokens, PTB escapes undone as ``data/text.py`` does;
``dep`` is spaCy's parse of those words; ``tree`` is the gold constituency tree, phrases as [MASK] nodes)
and ``trec`` (coarse, 6 classes; TREC has no dev split, so a seeded 10% of train is held out as dev;
words are spaCy's tokens; there is no gold tree, so ``tree`` is the dependency tree).

Embeddings are cached per (dataset, split, graph) under ``.cache/tagnn/graph_probe`` (the file name holds
a hash of the sentences and the graph's settings), so a rerun only fits probes. Writes
``<out>.json``, ``<out>.md`` and the figure. ``--rejudge`` runs no model: it judges every graph against the
complete graph again from the per-sentence outcomes in ``<out>.json`` and writes it and the table again (the
figure shows no verdict).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from data.datasets import dataset_names
from data.graphs import GRAPH_KINDS
from tools.replay import Table

log = logging.getLogger("studies.graph_probe")
ROOT = Path(__file__).resolve().parents[2]


def graph_names() -> tuple[str, ...]:
    """Every registered graph that lifts from words to word pieces (data/wordpiece.py), in the registry's order."""
    return tuple(name for name, kind in GRAPH_KINDS.items() if kind.word_graph is not None)


L2_GRID = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
CACHE = ROOT / ".cache" / "tagnn" / "graph_probe"
PERCENTILES = (1, 5, 25, 50, 75, 95)
NOTES = {
    "sst_binary": "Words: the treebank's tokens (PTB escapes undone). dep: spaCy's parse of those words. tree: the gold "
    "constituency tree, each phrase a [MASK] node at its first piece, linked both ways to its children.",
    "trec": "Coarse classes (6). Dev: a seeded 10% of train_5500 (TREC has no dev split); test: TREC_10. Words: "
    "spaCy's tokens. No gold tree: the tree row is the dependency tree (the dep row again).",
}


class ProbeError(ValueError):
    """Bad input: one line for the user."""


@dataclass
class Split:
    """One split: words per sentence, labels, and (filled on demand) dependency heads and gold trees."""

    words: list[list[str]]
    labels: list[int]
    parents: list[list[int]] | None = None  # gold constituency trees (SST), data.corpora's form
    heads: list[list[int]] | None = None  # spaCy dependency heads over ``words``
    meta: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------
def _digest(*parts) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def _cached_json(name: str, make):
    path = CACHE / name
    if path.is_file():
        return json.loads(path.read_text())
    value = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)
    return value


def _sample(n: int, limit: int | None, seed: int = 0) -> list[int]:
    """A seeded subset of indices in file order (the SST files are sorted by sentiment: no head slice)."""
    if not limit or limit >= n:
        return list(range(n))
    return sorted(random.Random(seed).sample(range(n), limit))


def load_sst_binary(data_dir: Path, limit: int | None = None) -> dict[str, Split]:
    from data.corpora import read_sst
    from data.text import unescape_ptb

    out = {}
    for split, name in (("train", "train.txt"), ("dev", "dev.txt"), ("test", "test.txt")):
        trees = read_sst(data_dir / name, binary=True)
        trees = [trees[i] for i in _sample(len(trees), limit)]
        words = [[unescape_ptb(t) for t in tree["tokens"]] for tree in trees]
        out[split] = Split(words, [t["label"] for t in trees], [t["parent"] for t in trees])
    return out


def load_trec(data_dir: Path, limit: int | None = None, dev_fraction: float = 0.1, seed: int = 0) -> dict[str, Split]:
    from data.corpora import read_trec
    from data.text import load_parser, parse_texts

    train, names = read_trec(data_dir / "train_5500.label")
    test, _ = read_trec(data_dir / "TREC_10.label", names=names)
    order = list(range(len(train)))
    random.Random(seed).shuffle(order)
    n_dev = int(round(dev_fraction * len(train)))
    rows = {"train": [train[i] for i in sorted(order[n_dev:])], "dev": [train[i] for i in sorted(order[:n_dev])]}
    rows["test"] = test
    out = {}
    nlp = None
    for split, r in rows.items():
        r = [r[i] for i in _sample(len(r), limit)]
        texts = [x["text"] for x in r]

        def parse(texts=texts, split=split):
            nonlocal nlp
            nlp = nlp or load_parser()
            return parse_texts(texts, nlp, desc=f"parsing trec/{split}")

        parsed = _cached_json(f"parse_trec_{split}_{_digest(texts)}.json", parse)
        out[split] = Split([p[0] for p in parsed], [x["label"] for x in r], None, [p[1] for p in parsed])
    return out


def add_heads(dataset: str, splits: dict[str, Split]) -> None:
    """spaCy's dependency heads over each split's own words (cached)."""
    from data.text import load_parser, parse_words

    nlp = None
    for name, split in splits.items():
        if split.heads is not None:
            continue

        def parse(split=split, name=name):
            nonlocal nlp
            nlp = nlp or load_parser()
            return parse_words(split.words, nlp, desc=f"parsing {dataset}/{name}")

        split.heads = _cached_json(f"heads_{dataset}_{name}_{_digest(split.words)}.json", parse)


# the registered datasets the probe reads words (and SST's gold trees) of: name -> (folder, loader)
LOADERS = {"sst_binary": ("sst", load_sst_binary), "trec": ("trec", load_trec)}
DATASETS = tuple(name for name in dataset_names() if name in LOADERS)


def load_dataset(name: str, data_root: Path, limit: int | None = None) -> dict[str, Split]:
    if name not in DATASETS:
        raise ProbeError(f"unknown dataset {name!r}; valid: {', '.join(DATASETS)}")
    folder, load = LOADERS[name]
    return load(data_root / folder, limit)


# --------------------------------------------------------------------------------------------
# embeddings
# --------------------------------------------------------------------------------------------
def build_graphs(split: Split, graph: str, wordpiece, window: int = 2, bpt_k: int = 4) -> list:
    from data.wordpiece import piece_graph

    if graph not in graph_names():
        raise ProbeError(f"unknown graph {graph!r}; valid: {', '.join(graph_names())}")
    graphs = []
    for k, words in enumerate(split.words):
        heads = split.heads[k] if split.heads is not None and graph in ("dep", "tree") else None
        parent = split.parents[k] if split.parents is not None and graph == "tree" else None
        if graph in ("dep", "tree") and heads is None and parent is None:
            raise ProbeError(f"graph={graph} needs dependency heads: call add_heads first")
        graphs.append(
            piece_graph(
                wordpiece.pieces(words),
                graph,
                heads=heads,
                window=window,
                bpt_k=bpt_k,
                mask_id=wordpiece.mask_id,
                parent=parent,
            )
        )
    return graphs


def embed_graphs(graphs: list, model, batch_size: int = 64, progress: bool = True, desc: str = "") -> np.ndarray:
    """(len(graphs), d) float32 unit vectors; batches of similar size (sorted by node count) to keep
    the dense twin's padding small; returned in the input order."""
    import dgl
    from tqdm import tqdm

    order = sorted(range(len(graphs)), key=lambda i: graphs[i].num_nodes())
    out = np.zeros((len(graphs), model.hidden_dim), dtype=np.float32)
    with torch.no_grad():
        for start in tqdm(range(0, len(order), batch_size), desc=desc, disable=not progress, mininterval=5):
            idx = order[start : start + batch_size]
            out[idx] = model.sentence_embeddings(dgl.batch([graphs[i] for i in idx])).numpy()
    return out


def embeddings(
    dataset: str, split_name: str, split: Split, graph: str, model, wordpiece, progress: bool = True, **graph_kw
) -> np.ndarray:
    """``(embeddings, seconds to compute them, from the cache?)`` of the split on ``graph``; the cache is
    used when the same sentences were embedded on the same graph before."""
    key = _digest(
        split.words,
        split.parents if graph == "tree" else None,
        split.heads if graph in ("dep", "tree") else None,
        graph_kw,
    )
    if graph == "tree" and split.parents is None:  # no gold tree (TREC): tree is the dependency tree
        graph = "dep"
    path = CACHE / f"emb_{dataset}_{split_name}_{graph}_{key}.npy"
    timing = path.with_suffix(".seconds")  # how long the cached array took to compute
    if path.is_file():
        seconds = float(timing.read_text()) if timing.is_file() else float("nan")
        return np.load(path), seconds, True
    t = time.time()
    graphs = build_graphs(split, graph, wordpiece, **graph_kw)
    array = embed_graphs(graphs, model, progress=progress, desc=f"{dataset}/{split_name}/{graph}")
    seconds = time.time() - t
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npy")
    np.save(tmp, array)
    timing.write_text(f"{seconds:.3f}")
    os.replace(tmp, path)
    return array, seconds, False


def cosine_table(emb: dict[str, np.ndarray], reference: str = "complete") -> dict[str, dict]:
    """Per graph: mean, min and percentiles of the per-sentence cosine to ``reference``'s embedding
    (rows are unit vectors, so the cosine is the dot product; renormalised anyway)."""
    ref = emb[reference] / np.linalg.norm(emb[reference], axis=1, keepdims=True)
    table = {}
    for graph, x in emb.items():
        cos = np.sum(ref * (x / np.linalg.norm(x, axis=1, keepdims=True)), axis=1)
        row = {"mean": float(cos.mean()), "min": float(cos.min())}
        row.update({f"p{q}": float(np.percentile(cos, q)) for q in PERCENTILES})
        row["values"] = cos
        table[graph] = row
    return table


# --------------------------------------------------------------------------------------------
# the probe
# --------------------------------------------------------------------------------------------
def fit_logreg(x: torch.Tensor, y: torch.Tensor, num_classes: int, l2: float, max_iter: int = 200):
    """Multinomial logistic regression, full batch L-BFGS from zero: minimises mean cross-entropy +
    l2 * ||W||² (the bias is not penalised). Returns (W (d, C), b (C,))."""
    w = torch.zeros(x.shape[1], num_classes, dtype=x.dtype, requires_grad=True)
    b = torch.zeros(num_classes, dtype=x.dtype, requires_grad=True)
    opt = torch.optim.LBFGS(
        [w, b],
        lr=1.0,
        max_iter=max_iter,
        history_size=20,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-7,
        tolerance_change=1e-10,
    )

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(x @ w + b, y) + l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def accuracy(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> float:
    return float(((x @ w + b).argmax(-1) == y).double().mean())


def versus_complete(probe_g: dict, probe_complete: dict, dataset: str) -> dict:
    """The graph's probe against the complete graph's, by ``tools.stats.compare``: two deterministic cells
    (one value each, no seeds), paired over the test sentences by their per-sentence outcomes. Returns the
    verdict's ``as_dict()``: ``diff`` (graph minus complete), ``noise`` (the threshold), ``verdict`` ("A higher":
    the graph; "B higher": the complete graph), ``rule`` ("paired")."""
    from tools.stats import Cell, compare

    def cell(p: dict) -> Cell:
        return Cell([p["test_acc"]], correct=p["test_correct"], fingerprint=f"{dataset}: test", deterministic=True)

    return compare(cell(probe_g), cell(probe_complete)).as_dict()


def noise(p: float, n: int) -> float:
    """Two binomial standard errors of an accuracy p measured on n examples: the error bar of one accuracy
    (table and figure), not a test of a difference (that is ``versus_complete``)."""
    return 2.0 * math.sqrt(p * (1.0 - p) / n)


def probe(train, dev, test, grid=L2_GRID) -> dict:
    """Fit on train for each L2 in ``grid``, choose on dev (best accuracy; ties: the stronger L2), report
    the chosen one's test accuracy. Each of train/dev/test is (features (n, d), labels (n,)). Features
    are standardised with train's mean and std. Test accuracy of every setting is kept for the record,
    never used to choose."""
    (xtr, ytr), (xdv, ydv), (xte, yte) = [
        (torch.as_tensor(np.asarray(x), dtype=torch.float64), torch.as_tensor(np.asarray(y), dtype=torch.long))
        for x, y in (train, dev, test)
    ]
    mean, std = xtr.mean(0), xtr.std(0).clamp(min=1e-8)
    xtr, xdv, xte = [(x - mean) / std for x in (xtr, xdv, xte)]
    num_classes = int(max(ytr.max(), ydv.max(), yte.max())) + 1
    rows = []
    for l2 in grid:
        w, b = fit_logreg(xtr, ytr, num_classes, l2)
        rows.append(
            {
                "l2": l2,
                "train": accuracy(xtr, ytr, w, b),
                "dev": accuracy(xdv, ydv, w, b),
                "test": accuracy(xte, yte, w, b),
                "correct": ((xte @ w + b).argmax(-1) == yte).int().tolist(),
            }
        )
    best = max(rows, key=lambda r: (r["dev"], r["l2"]))  # ties: the stronger L2
    correct = best["correct"]
    for r in rows:
        del r["correct"]
    return {
        "l2": best["l2"],
        "train_acc": best["train"],
        "dev_acc": best["dev"],
        "test_acc": best["test"],
        "test_noise": noise(best["test"], len(yte)),
        "n_test": len(yte),
        "test_correct": correct,  # per test sentence, for paired comparisons between graphs
        "grid": rows,
    }


# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------
def parse_list(text: str, valid: tuple[str, ...], what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in valid]
    if bad or not items:
        raise ProbeError(f"unknown {what} {bad[0] if bad else text!r}; valid: {', '.join(valid)} (comma-separated)")
    return items


def run_dataset(
    name: str, graphs: list[str], model, wordpiece, data_root: Path, limit: int | None, progress: bool, graph_kw: dict
) -> dict:
    t0 = time.time()
    splits = load_dataset(name, data_root, limit)
    if any(g in ("dep", "tree") for g in graphs):
        add_heads(name, splits)
    load_s = time.time() - t0
    emb, times, cached = {}, {}, {}
    for graph in ["complete"] + [g for g in graphs if g != "complete"]:
        got = {s: embeddings(name, s, sp, graph, model, wordpiece, progress, **graph_kw) for s, sp in splits.items()}
        emb[graph] = {s: g[0] for s, g in got.items()}
        times[graph] = sum(g[1] for g in got.values())
        cached[graph] = all(g[2] for g in got.values())
        log.info(
            "%s graph=%s: embedded %s in %.1f s%s",
            name,
            graph,
            "/".join(str(len(sp.labels)) for sp in splits.values()),
            times[graph],
            " (read from the cache)" if cached[graph] else "",
        )
    cos = cosine_table({g: e["test"] for g, e in emb.items()})
    result = {"sizes": {s: len(sp.labels) for s, sp in splits.items()}, "load_s": load_s, "graphs": {}}
    probes = {g: probe(*[(emb[g][s], splits[s].labels) for s in ("train", "dev", "test")]) for g in emb}
    for graph in graphs:
        p = probes[graph]
        if graph != "complete":  # the reference itself
            p["vs_complete"] = versus_complete(p, probes["complete"], name)
        c = {k: v for k, v in cos[graph].items() if k != "values"}
        result["graphs"][graph] = {
            "cosine_to_complete": c,
            "probe": p,
            "embed_s": times[graph],
            "cached": cached[graph],
            "cosine_values": cos[graph]["values"].round(5).tolist(),
        }
        log.info(
            "%s graph=%s: cos mean %.4f, probe l2=%g dev %.4f test %.4f ± %.4f",
            name,
            graph,
            c["mean"],
            p["l2"],
            p["dev_acc"],
            p["test_acc"],
            p["test_noise"],
        )
    return result


VERDICT_WORDS = {"A higher": "graph higher", "B higher": "complete higher"}  # compare(graph, complete)


def judged(name: str, res: dict) -> dict[str, dict]:
    """Every graph but the complete one against the complete graph (``versus_complete``), judged again from the
    per-sentence outcomes each time a table is drawn: the committed JSON's verdicts are not trusted as written."""
    probes = {g: r["probe"] for g, r in res["graphs"].items()}
    return {g: versus_complete(p, probes["complete"], name) for g, p in probes.items() if g != "complete"}


def differences_line(name: str, res: dict) -> str:
    """The graphs whose probe accuracy the rule finds lower or higher than the complete graph's, and the rest."""
    lower, higher, level = [], [], []
    for graph, v in judged(name, res).items():
        text = f"{graph} {100 * v['diff']:+.2f} (noise {100 * v['noise']:.2f})"
        {"B higher": lower, "A higher": higher}.get(v["verdict"], level).append(text)
    return (
        "Test accuracy against the complete graph, by `tools.stats.compare` (paired over the test sentences; "
        f"[docs/statistics.md](../statistics.md)): lower: {', '.join(lower) or '—'}; higher: "
        f"{', '.join(higher) or '—'}; no difference measurable here: {', '.join(level) or '—'}."
    )


def _dataset_section(name: str, res: dict) -> list[str]:
    """One dataset's table under the command that produced it and its wall time."""
    sizes = res["sizes"]
    lines = [
        f"## {name} (train/dev/test {sizes['train']}/{sizes['dev']}/{sizes['test']})",
        "",
        f"`{res['command']}`",
        "",
        (
            f"Embeddings computed by `{res['first_command']}` in {res['first_wall_s'] / 60:.1f} min; this run "
            f"read them all from the cache and took {res['wall_s'] / 60:.1f} min."
        )
        if "first_wall_s" in res
        else f"Wall time {res['wall_s'] / 60:.1f} min"
        + (
            f" (embeddings of {', '.join(g for g, r in res['graphs'].items() if r.get('cached'))} read "
            "from the cache; `embed s` is their first computation)."
            if any(r.get("cached") for r in res["graphs"].values())
            else "."
        ),
        "",
        "| graph | cos mean | p1 | p5 | p25 | p50 | min | probe L2 | dev acc | test acc | ± 2 s.e. "
        "| test − complete | noise | verdict | rule | embed s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    if name in NOTES:
        lines[-2:-2] = [NOTES[name], ""]
    verdicts = judged(name, res)
    for graph, r in res["graphs"].items():
        c, p = r["cosine_to_complete"], r["probe"]
        v = verdicts.get(graph)
        judged_cells = (
            f"{100 * v['diff']:+.2f} | {100 * v['noise']:.2f} | {VERDICT_WORDS.get(v['verdict'], v['verdict'])} "
            f"| {v['rule']}"
            if v
            else "+0.00 | – | the reference | –"
        )
        lines.append(
            f"| {graph} | {c['mean']:.4f} | {c['p1']:.4f} | {c['p5']:.4f} | {c['p25']:.4f} | "
            f"{c['p50']:.4f} | {c['min']:.4f} | {p['l2']:g} | {100 * p['dev_acc']:.2f} | "
            f"{100 * p['test_acc']:.2f} | {100 * p['test_noise']:.2f} | {judged_cells} | {r['embed_s']:.0f} |"
        )
    return lines + ["", differences_line(name, res), ""]


def write_markdown(results: dict, path: Path) -> None:
    """The table per dataset, each under the command that produced it and its wall time."""
    lines = [
        "# The pretrained MiniLM, frozen, on every graph: cosine to the complete graph and a linear probe",
        "",
        "Same all-MiniLM-L6-v2 weights, no training; only the graph over the WordPiece tokens changes "
        "(lifted from words by data/wordpiece.py's rule). Embedding: mean-pooled, L2-normalised. "
        "Cosine: per test sentence, to the complete graph's embedding (1.0 = unchanged). Probe: logistic "
        "regression on standardised embeddings (L-BFGS, full batch), L2 strength chosen on dev from "
        f"{', '.join(f'{v:g}' for v in L2_GRID)}; `± 2 s.e.`: 2·sqrt(p(1−p)/n), the error bar of one test "
        "accuracy, not a test of a difference. `test − complete`: the graph's test accuracy minus the complete "
        "graph's, judged by `tools.stats.compare`, the rule of [docs/statistics.md](../statistics.md): "
        "embeddings and probe are deterministic (no seeds: L-BFGS from zero), so only the test term counts, "
        "paired over the test sentences (`rule`: paired); `noise` is its threshold (Student's t at the "
        "two-sided 5% level), `verdict` what it finds. Wall time: loading, parsing, embedding "
        "every split on every graph (dense twin, 1 thread, 2 cores shared with other jobs) and the "
        "probes; `embed s` is each graph's share.",
        "",
    ]
    for name, res in results.items():
        lines += _dataset_section(name, res)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def write_figure(results: dict, path: Path) -> None:
    from tools.common import pyplot

    plt = pyplot()
    fig, axes = plt.subplots(len(results), 2, figsize=(11, 3.6 * len(results)), squeeze=False)
    for row, (name, res) in enumerate(results.items()):
        graphs = list(res["graphs"])
        acc = [100 * res["graphs"][g]["probe"]["test_acc"] for g in graphs]
        err = [100 * res["graphs"][g]["probe"]["test_noise"] for g in graphs]
        dev = [100 * res["graphs"][g]["probe"]["dev_acc"] for g in graphs]
        ax = axes[row][0]
        ax.errorbar(range(len(graphs)), acc, yerr=err, fmt="o", capsize=4, label="test (± 2 s.e.)")
        ax.plot(range(len(graphs)), dev, "x", color="gray", label="dev")
        ax.set_xticks(range(len(graphs)), graphs)
        ax.set_ylabel("frozen probe accuracy (%)")
        ax.set_title(f"{name}: logistic regression on frozen embeddings")
        ax.legend(fontsize=8)
        ax = axes[row][1]
        ax.boxplot([res["graphs"][g]["cosine_values"] for g in graphs], whis=(5, 95), showfliers=False)
        ax.set_xticks(range(1, len(graphs) + 1), graphs)
        ax.set_ylabel("cosine to complete graph's embedding")
        ax.set_title(f"{name}: test sentences (box 25-75%, whiskers 5-95%)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def merge_results(path: Path, results: dict) -> dict:
    """The datasets already in ``path`` (from earlier runs, each with its own command) that this run did
    not redo, then this run's: a second dataset can be added without rerunning the first."""
    if not path.is_file():
        return results
    try:
        old = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        log.warning("%s is unreadable: overwriting it with this run's results only", path)
        return results
    merged = {}
    for name, res in old.get("results", {}).items():
        res.setdefault("command", old.get("command", "?"))  # files written before per-dataset commands
        res.setdefault("wall_s", old.get("wall_s", float("nan")))
        if name not in results:
            merged[name] = res
            continue
        new = results[name]
        if res["sizes"] != new["sizes"]:
            continue
        for graph, r in new["graphs"].items():  # cached embeddings with no timing of their own: the old run's
            if math.isnan(r["embed_s"]) and graph in res["graphs"]:
                r["embed_s"] = res["graphs"][graph]["embed_s"]
        if all(r.get("cached") for r in new["graphs"].values()):
            new["first_command"] = res.get("first_command", res["command"])
            new["first_wall_s"] = res.get("first_wall_s", res["wall_s"])
    merged.update(results)
    return merged


def write_record(out: Path, record: dict) -> Path:
    """``<out>.json``, with lists of numbers (per-sentence values) on one line each, written atomically."""
    path = out.with_suffix(".json")
    tmp = out.with_suffix(".json.tmp")
    text = json.dumps(record, indent=1)
    tmp.write_text(re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text))
    os.replace(tmp, path)
    return path


def rejudge(out: Path) -> dict:
    """No model run: every graph of ``<out>.json`` judged again against the complete graph from its per-sentence
    outcomes (``versus_complete``), then the JSON and the table written again (the figure shows no verdict)."""
    path = out.with_suffix(".json")
    record = json.loads(path.read_text())
    for name, res in record["results"].items():
        for graph, v in judged(name, res).items():
            probe_g = res["graphs"][graph]["probe"]
            probe_g.pop("vs_complete_noise", None)  # the rule before tools.stats: two paired standard errors
            probe_g["vs_complete"] = v
        res["graphs"]["complete"]["probe"].pop("vs_complete_noise", None)
        res["graphs"]["complete"]["probe"].pop("vs_complete", None)
    write_record(out, record)
    write_markdown(record["results"], out.with_suffix(".md"))
    return record


def replay_table(frozen: dict) -> str:
    """``docs/results/pretrained_graphs_frozen.md`` from its JSON alone (``tools.check_docs`` replays it)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "table.md"
        write_markdown(frozen["results"], path)
        return path.read_text()


# the table tools.check_docs replays
REPLAYS = [
    Table(
        "docs/results/pretrained_graphs_frozen.md",
        ("docs/results/pretrained_graphs_frozen.json",),
        replay_table,
        "studies.graph_probe.write_markdown",
    )
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="sst_binary", help=f"comma-separated: {', '.join(DATASETS)}")
    graphs = graph_names()
    parser.add_argument("--graphs", default=",".join(graphs), help=f"comma-separated: {', '.join(graphs)}")
    parser.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--impl", default="dense", choices=("dense", "sparse"), help="the model's implementation")
    parser.add_argument("--limit", type=int, default=None, help="a seeded subset of this many sentences per split")
    parser.add_argument("--out", default="docs/results/pretrained_graphs_frozen", help="prefix of the .json and .md")
    parser.add_argument("--figure", default="docs/figures/pretrained_graphs_frozen.png")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--rejudge", action="store_true", help="run no model: judge <out>.json again, write it and its table"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s: %(message)s", datefmt="%H:%M:%S")
    if args.rejudge:
        try:
            rejudge(Path(args.out))
        except (OSError, KeyError, json.JSONDecodeError) as err:
            print(f"error: {args.out}.json: {err}", file=sys.stderr)
            return 2
        log.info("judged %s.json again; wrote %s.{json,md}", args.out, args.out)
        return 0
    command = "python -m studies.graph_probe " + " ".join(argv if argv is not None else sys.argv[1:])
    start = time.time()
    try:
        datasets = parse_list(args.datasets, DATASETS, "dataset")
        graphs = parse_list(args.graphs, graphs, "graph")
        if "complete" not in graphs:
            raise ProbeError("--graphs must include complete: the cosine is measured against it")
        from models.minilm import build_minilm, load_wordpiece

        model = build_minilm({"normalize": True, "impl": args.impl}, None).eval()
        wordpiece = load_wordpiece()
        results = {}
        for name in datasets:
            t = time.time()
            results[name] = run_dataset(
                name, graphs, model, wordpiece, args.data_root, args.limit, not args.no_progress, {}
            )
            results[name].update(
                command=command,
                wall_s=time.time() - t,
                impl=args.impl,
                limit=args.limit,
                torch_threads=torch.get_num_threads(),
            )
    except (ProbeError, ModuleNotFoundError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    wall = time.time() - start
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = merge_results(out.with_suffix(".json"), results)
    write_record(out, {"l2_grid": list(L2_GRID), "results": results})
    write_markdown(results, out.with_suffix(".md"))
    write_figure(results, Path(args.figure))
    log.info("wrote %s.{json,md} and %s in %.1f min", out, args.figure, wall / 60)
    return 0
