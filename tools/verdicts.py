"""The verdicts the prose pages state, judged by ``tools.stats.compare`` from committed records.

    python -m tools.verdicts            # writes docs/results/verdicts.json and docs/results/verdicts.md

``docs/listops.md``, ``docs/long_range.md`` and ``docs/real_sentences.md`` compare cells of ``make experiment``'s
tables in their prose ("the gold tree does not beat the complete graph", "one seed each"). Each comparison such a
sentence states is one line of ``COMPARISONS`` below: the page, a name, and its two cells. A cell is read from
committed per-run data:

- ``Records(experiment, overrides)``: the runs of ``docs/results/runs/<experiment>.jsonl`` whose overrides, but
  ``experiment=`` and ``seed=``, are exactly ``overrides`` (``"graph=complete; model=gat"``): one test accuracy a
  seed, and N, the test set's size, from each record's ``test_by_length`` counts;
- ``Records(..., part="root=[MAX")``: the same runs scored on one slice of the test set only, the examples whose
  root operator is ``[MAX`` (each record's ``test_by_root``), judged unpaired (the records keep no predictions by
  slice);
- ``Lengths(row, test_set)``: the runs of ``docs/results/long_range_lengths.json`` that its table shows in row
  ``row``, scored on ``test_set`` (N from the run's ``num_examples`` there);
- ``Pretrained(dataset, graph)``: the finished runs of ``docs/results/pretrained_graphs.json`` (MiniLM fine-tuned
  on sentences) on that dataset and graph (N from the runs' ``n_test``);

A ``Family`` judges every pair of a list (the prose's "no two cells differ") and keeps the count of findings. A
``Target`` judges one cell against a goal of ``docs/results/targets.json`` by ``tools.stats.against`` (met or missed,
within or beyond the noise).

Every pair is judged by ``tools.stats.compare``, the repository's one rule (docs/statistics.md): one seed a side is
not judged; with seeds, each cell's own seed variance over its seeds plus the test-set term, at the two-sided 5%
level. The test-set term is paired over the examples where every run of both cells kept its per-example predictions
(runs trained since 155a1c9), else the unpaired binomial term of each cell, not divided by the seeds.
The JSON is what the pages' ``<!-- ref: docs/results/verdicts.json > ... -->`` comments read; the table
(``docs/results/verdicts.md``) is drawn from the records again by ``tools.check_docs`` (``tools.replay.TABLES``),
and says that the JSON is stale when it no longer equals what the records give.
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from tools.stats import LEVEL_ANSWER, NOT_JUDGED, Cell, against, cell_of, compare

ROOT = Path(__file__).resolve().parents[1]
OUT = Path("docs/results/verdicts")
RUNS = "docs/results/runs"
LENGTHS = "docs/results/long_range_lengths.json"
PRETRAINED = "docs/results/pretrained_graphs.json"
TARGETS = "docs/results/targets.json"
COMMAND = "python -m tools.verdicts"
STALE = (
    "**docs/results/verdicts.json is stale**: it differs from what the records give; run `python -m tools.verdicts`."
)


def one_size(label: str, sizes: set[int]) -> int:
    """The one test-set size of a cell's runs; runs scored on sets of different sizes are not one cell."""
    if len(sizes) != 1:
        raise ValueError(f"{label}: its runs were tested on sets of {sorted(sizes)} examples")
    return next(iter(sizes))


@dataclass(frozen=True)
class Records:
    """The seeds of one cell of ``make experiment``'s records."""

    experiment: str
    overrides: str
    paired: bool = True  # False: judge as if the runs had kept no predictions (the unpaired rule, for contrast)
    part: str = ""  # "root=[MAX": only the test examples of that root operator (the records' test_by_root), unpaired

    @property
    def source(self) -> str:
        return f"{RUNS}/{self.experiment}.jsonl"

    @property
    def label(self) -> str:
        return f"{self.experiment}: {self.overrides}" + (f", {self.part}" if self.part else "")

    def cell(self, data: dict) -> Cell:
        want = sorted(o.strip() for o in self.overrides.split(";") if o.strip())
        runs = [
            r
            for r in data[self.source]
            if sorted(o for o in r["overrides"] if not o.startswith(("experiment=", "seed="))) == want
        ]
        if not runs:
            raise ValueError(f"{self.source}: no run with the overrides {'; '.join(want)}")
        sizes = {sum(b["n"] for b in r["test_by_length"].values()) for r in runs}
        runs = sorted(runs, key=lambda r: r["seed"])
        if self.part:  # a slice of the test set: its accuracy and size in each record, judged unpaired
            return self.part_cell(runs)
        if self.paired:  # paired over the test examples where every run kept its predictions (tools.stats)
            return cell_of(runs, n=one_size(self.label, sizes))
        return Cell([r["test_acc"] for r in runs], n=one_size(self.label, sizes))

    def part_cell(self, runs: list[dict]) -> Cell:
        by, _, key = self.part.partition("=")
        slices = [r.get(f"test_by_{by}", {}).get(key) for r in runs]
        if not all(slices):
            raise ValueError(f"{self.label}: a run's record has no test_by_{by} entry {key!r}")
        sizes = {s["n"] for s in slices}
        if len(sizes) != 1:
            raise ValueError(f"{self.label}: its runs hold {sorted(sizes)} examples of {key}")
        return Cell([s["acc"] for s in slices], n=one_size(self.label, sizes))


def length_row(r: dict) -> str:
    """The row of ``docs/results/long_range_lengths.md`` a run of its JSON is in: its model (and cell), graph and,
    when not 5, the arity it was trained with (``studies.long_range`` labels its rows with it)."""
    cell = f" {r['cell']}" if r.get("cell") and r["model"] in ("treelstm", "recursive") else ""
    args = r.get("train_args", 5)
    trained = f" (trained with 2-{args} arguments)" if args != 5 else ""
    return f"{r['model']}{cell} / {r['graph']}{trained}"


@dataclass(frozen=True)
class Lengths:
    """The seeds of one row of ``docs/results/long_range_lengths.md``, on one of its test sets."""

    row: str
    test_set: str
    source = LENGTHS

    @property
    def label(self) -> str:
        return f"long_range_lengths: {self.row}, {self.test_set}"

    def cell(self, data: dict) -> Cell:
        runs = [r for r in data[self.source]["runs"] if length_row(r) == self.row and self.test_set in r["sets"]]
        if not runs:
            raise ValueError(f"{self.source}: no run in row {self.row!r} scored on {self.test_set!r}")
        sizes = {r["sets"][self.test_set]["num_examples"] for r in runs}
        return Cell([r["sets"][self.test_set]["accuracy"] for r in runs], n=one_size(self.label, sizes))


@dataclass(frozen=True)
class Pretrained:
    """The seeds of one cell of ``docs/results/pretrained_graphs.json`` (MiniLM fine-tuned on sentences): its
    finished runs on ``dataset`` with ``graph`` and no other setting (the learning-rate and epoch sweeps' runs,
    seed 0 at other settings, are not seeds of the cell)."""

    dataset: str
    graph: str
    source = PRETRAINED

    @property
    def label(self) -> str:
        return f"pretrained_graphs: {self.dataset}, {self.graph}"

    def cell(self, data: dict) -> Cell:
        runs = [
            r
            for r in data[self.source]["runs"]
            if r.get("finished")
            and r["settings"] == {**r["settings"], "dataset": self.dataset, "graph": self.graph}
            and set(r["settings"]) == {"dataset", "graph", "seed"}  # not the sweeps' runs (optim.lr=..., epochs)
        ]
        if not runs:
            raise ValueError(f"{self.source}: no finished run of {self.dataset} with graph={self.graph}")
        sizes = {r["n_test"] for r in runs}
        return Cell(
            [r["test_acc"] for r in sorted(runs, key=lambda r: int(r["settings"]["seed"]))],
            n=one_size(self.label, sizes),
        )


@dataclass(frozen=True)
class Comparison:
    page: str  # the key under "pages": the page's name without .md, in docs/ or else docs/results/ (page_path)
    name: str
    a: Records | Lengths | Pretrained
    b: Records | Lengths | Pretrained


@dataclass(frozen=True)
class Family:
    """Every pair of ``pairs`` judged; the page states how many the rule finds a difference in."""

    page: str
    name: str
    pairs: tuple[tuple[Records, Records], ...]


@dataclass(frozen=True)
class Target:
    """One cell against a goal of ``docs/results/targets.json`` (``target``: its name there), judged by
    ``tools.stats.against``: the same rule with one side (docs/statistics.md, "Against a fixed number")."""

    page: str
    name: str
    cell: Records | Lengths
    target: str
    source = TARGETS


def every_pair(experiment: str, cells: list[str]) -> tuple[tuple[Records, Records], ...]:
    return tuple((Records(experiment, a), Records(experiment, b)) for a, b in itertools.combinations(cells, 2))


def grid(models: tuple[str, ...], graphs: tuple[str, ...], have: set[tuple[str, str]] | None = None) -> list[str]:
    return [f"graph={g}; model={m}" for m in models for g in graphs if have is None or (m, g) in have]


def grid_values(experiment: str, k: int, key: str) -> tuple[str, ...]:
    """The values grid ``k`` of ``conf/experiment/<experiment>.yaml`` sweeps ``key`` over (``model=a,b`` -> a, b):
    the cells are the experiment's, not a second list of registered names."""
    import shlex

    import yaml

    grids = yaml.safe_load((ROOT / "conf" / "experiment" / f"{experiment}.yaml").read_text())["experiment_grids"]
    for item in shlex.split(grids[k]):
        name, _, values = item.partition("=")
        if name == key:
            return tuple(values.split(","))
    raise KeyError(f"conf/experiment/{experiment}.yaml: grid {k + 1} sweeps no {key}")


SYNC = grid_values("sst", 0, "model")  # the synchronous encoders of the SST grids
SST_GRAPHS = grid_values("sst", 0, "graph")
SST_CELLS = grid(SYNC, SST_GRAPHS) + grid(grid_values("sst", 1, "model"), grid_values("sst", 1, "graph"))
TREC_CELLS = grid(grid_values("trec", 0, "model"), grid_values("trec", 0, "graph")) + grid(
    grid_values("trec", 1, "model"), grid_values("trec", 1, "graph")
)


def tree_vs_complete(experiment: str, trees: tuple[str, ...]) -> tuple[tuple[Records, Records], ...]:
    """Each tree cell (gold tree, dependency tree) against its model's complete graph and the complete-graph
    Transformer (the Tree-LSTM, which has no complete graph, against the Transformer only)."""
    pairs = []
    for model in (*SYNC, "treelstm"):
        for graph in trees:
            cell = Records(experiment, f"graph={graph}; model={model}")
            if model != "treelstm":
                pairs.append((cell, Records(experiment, f"graph=complete; model={model}")))
            if model != "transformer":
                pairs.append((cell, Records(experiment, "graph=complete; model=transformer")))
    return tuple(pairs)


def R(experiment: str, overrides: str) -> Records:
    return Records(experiment, overrides)


LS = "listops_scale"
COMPARISONS: list[Comparison | Family | Target] = [
    # docs/statistics.md: the first full-scale cells that kept their predictions, judged paired and, for contrast,
    # as if they had not
    Comparison("statistics", "graph_choice_depth, 2 tied layers: tree - complete",
               R("graph_choice_depth", "graph=tree; model.num_layers=2"),
               R("graph_choice_depth", "graph=complete; model.num_layers=2")),
    Comparison("statistics", "graph_choice_depth, 2 tied layers: tree - complete, unpaired",
               Records("graph_choice_depth", "graph=tree; model.num_layers=2", paired=False),
               Records("graph_choice_depth", "graph=complete; model.num_layers=2", paired=False)),
    # docs/essay.md, aggregation at full scale: where max gains and loses against mean, by the root operator
    *(
        Comparison("essay", f"aggregation {graph} {root}: max - mean",
                   Records("aggregation", f"graph={graph}; model=max", part=f"root={root}"),
                   Records("aggregation", f"graph={graph}; model=mean", part=f"root={root}"))
        for graph in ("complete", "tree")
        for root in ("[MAX", "[MIN", "[MED")
    ),
    # docs/results/sst_phrases.md: MiniLM fine-tuned on every phrase against the same model on sentences only
    *(
        Comparison("sst_phrases", f"{ds}: phrases - sentences, complete",
                   Records("sst_phrases", f"dataset.train_phrases=True; dataset={ds}; graph=complete"),
                   Pretrained(ds, "complete"))
        for ds in ("sst", "sst_binary")
    ),
    # docs/listops.md, "Every model at the published scale"
    Comparison("listops", "transformer: tree - complete", R(LS, "graph=tree; model=transformer"),
               R(LS, "graph=complete; model=transformer")),
    Comparison("listops", "gat: tree - complete", R(LS, "graph=tree; model=gat"), R(LS, "graph=complete; model=gat")),
    Comparison("listops", "complete: gat - gcn", R(LS, "graph=complete; model=gat"), R(LS, "graph=complete; model=gcn")),
    Comparison("listops", "tree: transformer - gcn", R(LS, "graph=tree; model=transformer"),
               R(LS, "graph=tree; model=gcn")),
    Comparison("listops", "window: gat - gcn", R(LS, "graph=window; model=gat"), R(LS, "graph=window; model=gcn")),
    # docs/long_range.md, "Length generalisation"
    Comparison("long_range", "LRA 501-1999: deep sets - transformer complete",
               Lengths("recursive deepsets / tree", "LRA 501-1999"), Lengths("transformer / complete", "LRA 501-1999")),
    Comparison("long_range", "LRA 501-1999: tree-lstm - transformer complete",
               Lengths("treelstm binary / binary_tree", "LRA 501-1999"),
               Lengths("transformer / complete", "LRA 501-1999")),
    Comparison("long_range", "deep sets: own test - LRA 1-100", Lengths("recursive deepsets / tree", "own test 1-100"),
               Lengths("recursive deepsets / tree", "LRA 1-100")),
    Comparison("long_range", "tree-lstm: own test - LRA 1-100",
               Lengths("treelstm binary / binary_tree", "own test 1-100"),
               Lengths("treelstm binary / binary_tree", "LRA 1-100")),
    Comparison("long_range", "LRA 501-1999: tree-lstm - tree-lstm trained with 2-10 arguments",
               Lengths("treelstm binary / binary_tree", "LRA 501-1999"),
               Lengths("treelstm binary / binary_tree (trained with 2-10 arguments)", "LRA 501-1999")),
    Comparison("long_range", "own test: bpt - complete", Lengths("transformer / bpt", "own test 1-100"),
               Lengths("transformer / complete", "own test 1-100")),
    Comparison("long_range", "LRA 501-1999: complete - bpt", Lengths("transformer / complete", "LRA 501-1999"),
               Lengths("transformer / bpt", "LRA 501-1999")),
    # the same short-split question with the complete graph's three seeds: listops_scale trained seeds 1-2 of the
    # run the lengths table copies (same config, same test split), so bpt's one seed borrows their spread
    Comparison("long_range", "own test: bpt - complete, 3 seeds", R("long_range", "graph=bpt; model=transformer"),
               R(LS, "graph=complete; model=transformer")),
    # the goal of >= 90% at LRA's lengths: the recipe's Tree-LSTM (one seed) and the arity-trained one (3 seeds)
    Target("long_range", "target long_range: tree-lstm", Lengths("treelstm binary / binary_tree", "LRA 501-1999"),
           "long_range"),
    Target("long_range", "target long_range: tree-lstm trained with 2-10 arguments",
           Lengths("treelstm binary / binary_tree (trained with 2-10 arguments)", "LRA 501-1999"), "long_range"),
    # trained on short expressions (studies.long_range, LRA's 501-1999 set) against trained on 2,000 long ones
    # (experiment=long_train, its own test set): two samples of one recipe, so unpaired
    *(
        Comparison("long_range", f"501-1999: tree-lstm trained short{arity} - trained long", Lengths(row, "LRA 501-1999"),
                   R("long_train", "graph=binary_tree; model.cell=binary; model=treelstm"))
        for arity, row in (("", "treelstm binary / binary_tree"),
                           (" with 2-10 arguments", "treelstm binary / binary_tree (trained with 2-10 arguments)"))
    ),
    Comparison("long_range", "501-1999: deep sets trained short - trained long",
               Lengths("recursive deepsets / tree", "LRA 501-1999"), R("long_train", "graph=tree; model=recursive")),
    # docs/real_sentences.md: TREC-6
    Comparison("real_sentences", "trec transformer: dep - complete", R("trec", "graph=dep; model=transformer"),
               R("trec", "graph=complete; model=transformer")),
    Comparison("real_sentences", "trec gat: dep - complete", R("trec", "graph=dep; model=gat"),
               R("trec", "graph=complete; model=gat")),
    Comparison("real_sentences", "trec gcn: dep - complete", R("trec", "graph=dep; model=gcn"),
               R("trec", "graph=complete; model=gcn")),
    Comparison("real_sentences", "trec: treelstm dep - transformer complete", R("trec", "graph=dep; model=treelstm"),
               R("trec", "graph=complete; model=transformer")),
    *(
        Comparison("real_sentences", f"trec {m}: {g} - none", R("trec", f"graph={g}; model={m}"),
                   R("trec", f"graph=none; model={m}"))
        for m in SYNC
        for g in ("complete", "dep", "window")
    ),
    # SST-5
    Family("real_sentences", "sst: every pair of cells", every_pair("sst", SST_CELLS)),
    *(
        Comparison("real_sentences", f"sst {m}: tree - complete", R("sst", f"graph=tree; model={m}"),
                   R("sst", f"graph=complete; model={m}"))
        for m in SYNC
    ),
    Comparison("real_sentences", "sst_tai sst: phrase labels - sentence labels",
               R("sst_tai", "dataset=sst; trainer.phrase_loss=True"),
               R("sst_tai", "dataset=sst; trainer.phrase_loss=False")),
    # binary SST
    Family("real_sentences", "sst_binary: every pair of synchronous cells", every_pair("sst_binary", grid(SYNC, SST_GRAPHS))),
    *(
        Comparison("real_sentences", f"sst_binary {m}: tree - complete", R("sst_binary", f"graph=tree; model={m}"),
                   R("sst_binary", f"graph=complete; model={m}"))
        for m in SYNC
    ),
    Comparison("real_sentences", "sst_binary: treelstm tree - gat complete", R("sst_binary", "graph=tree; model=treelstm"),
               R("sst_binary", "graph=complete; model=gat")),
    Comparison("real_sentences", "sst_binary: treelstm dep - gat complete", R("sst_binary", "graph=dep; model=treelstm"),
               R("sst_binary", "graph=complete; model=gat")),
    Comparison("real_sentences", "sst_binary: treelstm dep - gcn none", R("sst_binary", "graph=dep; model=treelstm"),
               R("sst_binary", "graph=none; model=gcn")),
    Comparison("real_sentences", "sst_tai sst_binary: phrase labels - sentence labels",
               R("sst_tai", "dataset=sst_binary; trainer.phrase_loss=True"),
               R("sst_tai", "dataset=sst_binary; trainer.phrase_loss=False")),
    # the model x graph grids with GloVe
    Family("real_sentences", "sst_binary_glove: trees - complete", tree_vs_complete("sst_binary_glove", ("tree", "dep"))),
    Family("real_sentences", "sst5_glove: trees - complete", tree_vs_complete("sst5_glove", ("tree", "dep"))),
    Family("real_sentences", "trec_glove: dep - complete", tree_vs_complete("trec_glove", ("dep",))),
    Comparison("real_sentences", "sst_binary_glove: treelstm tree - transformer none",
               R("sst_binary_glove", "graph=tree; model=treelstm"), R("sst_binary_glove", "graph=none; model=transformer")),
    *(
        Comparison("real_sentences", f"trec_glove {m}: dep - complete", R("trec_glove", f"graph=dep; model={m}"),
                   R("trec_glove", f"graph=complete; model={m}"))
        for m in ("transformer", "gat")
    ),
    Comparison("real_sentences", "sst5_glove: treelstm tree - transformer none",
               R("sst5_glove", "graph=tree; model=treelstm"), R("sst5_glove", "graph=none; model=transformer")),
    Comparison("real_sentences", "sst5_glove gat: window - none", R("sst5_glove", "graph=window; model=gat"),
               R("sst5_glove", "graph=none; model=gat")),
    Comparison("real_sentences", "sst5_glove gcn: complete - none", R("sst5_glove", "graph=complete; model=gcn"),
               R("sst5_glove", "graph=none; model=gcn")),
    *(
        Comparison("real_sentences", f"trec_glove {m}: {g} - none", R("trec_glove", f"graph={g}; model={m}"),
                   R("trec_glove", f"graph=none; model={m}"))
        for m in SYNC
        for g in ("complete", "dep", "window")
    ),
    Comparison("real_sentences", "trec transformer none: glove - scratch", R("trec_glove", "graph=none; model=transformer"),
               R("trec", "graph=none; model=transformer")),
    # GloVe against words learned from scratch, cell by cell: the same grid, config and test set but the embeddings
    # (TREC-6's GloVe grid also runs at lr 2e-3, the scratch grid at 1e-3)
    *(
        Comparison("real_sentences", f"trec transformer {g}: glove - scratch",
                   R("trec_glove", f"graph={g}; model=transformer"), R("trec", f"graph={g}; model=transformer"))
        for g in ("complete", "dep", "window")
    ),
    Family("real_sentences", "sst_binary: glove - scratch, every cell",
           tuple((R("sst_binary_glove", c), R("sst_binary", c)) for c in SST_CELLS)),
    Family("real_sentences", "sst5: glove - scratch, every cell",
           tuple((R("sst5_glove", c), R("sst", c)) for c in SST_CELLS)),
    Family("real_sentences", "trec: glove - scratch, every cell",
           tuple((R("trec_glove", c), R("trec", c)) for c in TREC_CELLS)),
    # the GloVe targets (docs/results/targets.json), each on the cell chosen on validation
    Target("real_sentences", "target sst_binary_glove",
           R("sst_tai_glove", "dataset=sst_binary; trainer.phrase_loss=True"), "sst_binary_glove"),
    Target("real_sentences", "target sst5_glove", R("sst_tai_glove", "dataset=sst; trainer.phrase_loss=True"),
           "sst5_glove"),
    Target("real_sentences", "target trec_glove",
           R("trec_glove_epochs", "graph=dep; model=treelstm; trainer.max_epochs=30"), "trec_glove"),
    # docs/real_sentences.md: TREC's best cell from scratch against Kim 2014's CNN over pretrained word vectors
    Target("real_sentences", "trec: treelstm dep - published cnn", R("trec", "graph=dep; model=treelstm"),
           "trec_kim_cnn_published"),
    # docs/real_sentences.md: the Tree-LSTM from scratch on phrase labels against Tai et al.'s, words randomly
    # initialised (the like-for-like anchor)
    Target("real_sentences", "sst_tai sst: treelstm - published random-init tree-lstm",
           R("sst_tai", "dataset=sst; trainer.phrase_loss=True"), "sst5_tai_random_published"),
    Target("real_sentences", "sst_tai sst_binary: treelstm - published random-init tree-lstm",
           R("sst_tai", "dataset=sst_binary; trainer.phrase_loss=True"), "sst_binary_tai_random_published"),
    # docs/listops.md: the complete-graph Transformer against the published Transformer (a published mean, no seeds
    # or test set of its own here)
    Target("listops", "transformer complete - published transformer", R(LS, "graph=complete; model=transformer"),
           "listops_transformer_published"),
]  # fmt: skip


def page_path(page: str) -> str:
    """``docs/<page>.md``, or ``docs/results/<page>.md`` for a result page's prose."""
    return f"docs/{page}.md" if (ROOT / "docs" / f"{page}.md").is_file() else f"docs/results/{page}.md"


def sources() -> tuple[str, ...]:
    """Every committed file a cell is read from, in a fixed order."""
    found = set()
    for c in COMPARISONS:
        if isinstance(c, Target):
            found |= {c.cell.source, c.source}
            continue
        pairs = c.pairs if isinstance(c, Family) else ((c.a, c.b),)
        found |= {side.source for pair in pairs for side in pair}
    return tuple(sorted(found))


def load(root: Path = ROOT) -> dict:
    """The committed files ``sources()`` names, parsed (a ``.jsonl`` as its list of records)."""
    out = {}
    for rel in sources():
        text = (root / rel).read_text()
        out[rel] = (
            [json.loads(x) for x in text.splitlines() if x.strip()] if rel.endswith(".jsonl") else json.loads(text)
        )
    return out


def side(spec: Records | Lengths | Pretrained, cell: Cell) -> dict:
    return {"cell": spec.label, "k": cell.k, "mean": cell.mean, "n": cell.n}


def judge(a: Records | Lengths | Pretrained, b: Records | Lengths | Pretrained, data: dict) -> dict:
    """One comparison by ``tools.stats.compare``: both cells, A − B, its noise (threshold), verdict and rule."""
    ca, cb = a.cell(data), b.cell(data)
    v = compare(ca, cb)
    return {"a": side(a, ca), "b": side(b, cb), "diff": v.diff, "noise": v.noise, "verdict": v.verdict, "rule": v.rule}


def said(v) -> str:
    """A target's verdict in words: met or missed, within or beyond the noise (one seed: not judged)."""
    if v.noise is None:
        return v.verdict
    return f"{'met' if v.diff >= 0 else 'missed'}, {'within' if v.verdict == LEVEL_ANSWER else 'beyond'} the noise"


def judge_target(t: Target, data: dict) -> dict:
    """One cell against its goal by ``tools.stats.against``: the cell, the goal, cell − goal, its noise, verdict."""
    if t.target not in data[t.source]:
        raise ValueError(
            f"{t.source} has no goal {t.target!r} for {t.page}'s {t.name!r}: add it there (target, what, set_by)"
        )
    cell, goal = t.cell.cell(data), data[t.source][t.target]["target"]
    v = against(cell, goal)
    return {
        "a": side(t.cell, cell),
        "target": goal,
        "diff": v.diff,
        "noise": v.noise,
        "verdict": v.verdict,
        "said": said(v),
        "rule": v.rule,
    }


def family(f: Family, data: dict) -> dict:
    judged = [judge(a, b, data) for a, b in f.pairs]
    findings = [j for j in judged if j["verdict"] in ("A higher", "B higher")]
    return {
        "pairs": len(judged),
        "not_judged": sum(j["verdict"] == NOT_JUDGED for j in judged),
        "findings": len(findings),
        "a_higher": sum(j["verdict"] == "A higher" for j in judged),
        "largest_gap": max(abs(j["diff"]) for j in judged),
        "smallest_gap": min(abs(j["diff"]) for j in judged),
        "smallest_noise": min(j["noise"] for j in judged if j["noise"] is not None),
        "rules": sorted({j["rule"] for j in judged if j["rule"]}),
        "found": [{"a": j["a"]["cell"], "b": j["b"]["cell"], "diff": j["diff"], "noise": j["noise"]} for j in findings],
    }


def compute(data: dict) -> dict:
    """Every comparison and family of ``COMPARISONS`` judged from ``data`` (``load()``)."""
    pages: dict[str, dict] = {}
    for c in COMPARISONS:
        if isinstance(c, Target):
            pages.setdefault(c.page, {})[c.name] = judge_target(c, data)
        else:
            pages.setdefault(c.page, {})[c.name] = family(c, data) if isinstance(c, Family) else judge(c.a, c.b, data)
    return {
        "command": COMMAND,
        "rule": "tools.stats.compare (docs/statistics.md)",
        "sources": list(sources()),
        "pages": pages,
    }


def _pts(x: float | None, sign: bool = False) -> str:
    return "–" if x is None else f"{100 * x:{'+' if sign else ''}.1f}"


def markdown(result: dict) -> str:
    """``docs/results/verdicts.md``: a table per page, every row a comparison its prose states."""
    lines = [
        "# Verdicts the prose pages state",
        "",
        f"Produced by `{result['command']}` from the committed records ({', '.join(f'`{s}`' for s in result['sources'])}). "
        "Every comparison is `tools.stats.compare` on its two cells, the rule of [docs/statistics.md](../statistics.md): "
        "one seed a side is not judged; otherwise each cell's own seed variance over its seeds plus the test-set "
        "term, Student's t on the Welch-Satterthwaite degrees of freedom at the two-sided 5% level. `noise` is that "
        "threshold, in points; `rule` names the test-set term: paired (example by example) where every run of both "
        "cells kept its per-example test predictions, else unpaired (each cell's binomial variance on its N test "
        "examples, not divided by the seeds: records written before predictions were kept). A = the first "
        "cell, B = the second; k = seeds.",
    ]
    for page, rows in result["pages"].items():
        single = {k: v for k, v in rows.items() if "verdict" in v and "target" not in v}
        families = {k: v for k, v in rows.items() if "pairs" in v}
        targets = {k: v for k, v in rows.items() if "target" in v}
        where = page_path(page)
        lines += ["", f"## {page} ([{where}](../{where.removeprefix('docs/')}))", ""]
        if single:
            lines += [
                "| comparison | A | k | B | k | N (A, B) | A − B | noise | verdict | rule |",
                "|---|---|---|---|---|---|---|---|---|---|",
            ]
            for name, v in single.items():
                a, b = v["a"], v["b"]
                n = f"{a['n']:,}" if a["n"] == b["n"] else f"{a['n']:,}, {b['n']:,}"
                lines.append(
                    f"| {name} | {a['cell']} | {a['k']} | {b['cell']} | {b['k']} | {n} | {_pts(v['diff'], True)} "
                    f"| {_pts(v['noise'])} | {v['verdict']} | {v['rule'] or '–'} |"
                )
        if families:
            lines += [
                "",
                "Families: every pair judged the same way; the findings listed.",
                "",
                "| family | pairs | not judged | findings | A higher | smallest gap (either sign) | largest gap (either sign) | smallest noise | rule "
                "| found |",
                "|---|---|---|---|---|---|---|---|---|---|",
            ]
            for name, f in families.items():
                found = "; ".join(
                    f"{x['a']} − {x['b']} {_pts(x['diff'], True)} (noise {_pts(x['noise'])})" for x in f["found"]
                )
                lines.append(
                    f"| {name} | {f['pairs']} | {f['not_judged']} | {f['findings']} | {f['a_higher']} "
                    f"| {_pts(f['smallest_gap'])} | {_pts(f['largest_gap'])} "
                    f"| {_pts(f['smallest_noise'])} | {', '.join(f['rules']) or '–'} | {found or '–'} |"
                )
        if targets:
            lines += [
                "",
                f"Targets: a cell against a goal of `{TARGETS}` by `tools.stats.against`, the same rule with one side "
                "(the cell's seed variance over its seeds plus its test term).",
                "",
                "| target | cell | k | N | goal | cell − goal | noise | verdict | rule |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for name, v in targets.items():
                a = v["a"]
                lines.append(
                    f"| {name} | {a['cell']} | {a['k']} | {a['n']:,} | {_pts(v['target'])} | {_pts(v['diff'], True)} "
                    f"| {_pts(v['noise'])} | {v['said']} | {v['rule'] or '–'} |"
                )
    return "\n".join(lines) + "\n"


def replay(committed: dict, *data: object) -> str:
    """What ``tools.check_docs`` compares ``docs/results/verdicts.md`` with: the table drawn from the records
    (``data``, in the order of ``sources()``), and a first line saying so when the committed JSON differs."""
    fresh = compute(dict(zip(sources(), data)))
    text = markdown(fresh)
    if json.loads(json.dumps(fresh)) != committed:
        text = STALE + "\n\n" + text
    return text


def write(root: Path = ROOT, out: Path = OUT) -> dict:
    from engine.io import write_json, write_text

    result = compute(load(root))
    write_json(root / out.with_suffix(".json"), result)
    write_text(root / out.with_suffix(".md"), markdown(result))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    result = write()
    for page, rows in result["pages"].items():
        for name, v in rows.items():
            if "verdict" in v:
                verdict = v.get("said", v["verdict"])
                print(f"{page:15s} {name:62s} {_pts(v['diff'], True):>6s} noise {_pts(v['noise']):>5s}  {verdict}")
            else:
                print(f"{page:15s} {name:62s} {v['findings']} findings of {v['pairs']} pairs")
    print(f"wrote {OUT}.json and {OUT}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
