"""One place for each thing: every graph, model and dataset is one registry entry plus its YAML.

* every config file composes;
* every name of conf/graph, conf/model and conf/dataset is a string literal in at most one core module
  (the module that registers it: a graph's is ``data/graphs/<name>.py``), so nothing else branches on it;
* lists of names outside the core (tools/results_table.py, conf/config.yaml's comment) match the registries,
  and tools/, studies/ and bench/ write no list of them: a module-level list or a ``choices=``/``default=``
  of two or more names of one group is read from the registries, so a new graph, model or dataset is
  accepted there without an edit (a study's own design, the cells it compares, is named in DESIGNS);
* a toy graph added by exactly the two-file path (one module that registers itself on import, as a new module
  of data/graphs/ does; its YAML in conf/graph/) trains with debug=tiny.
"""

import ast
import dataclasses
import functools
import importlib
import json
import re
import sys

import pytest
import yaml

from data.datasets import dataset_names
from data.graphs import GRAPH_KINDS, GraphConstruction
from models import model_names
from tests.conftest import CONF, ROOT, compose_config, rescored_test_acc

CORE = sorted([*ROOT.glob("data/**/*.py"), *ROOT.glob("models/**/*.py"), *ROOT.glob("engine/*.py")]) + [
    ROOT / "train.py",
    ROOT / "evaluate.py",
]
# Names that are also the values of other options, so a literal of theirs is not (only) the name:
EXEMPT = {
    "none": "model.positional=none",
    "tree": "model.pe_graph=tree",
    "mean": "model.readout=mean, and a reduction",
    "max": "a reduction (W&B's summary of a metric)",
    "sum": "a reduction (the confusion matrix's totals)",
}


@functools.cache
def names_of(group: str) -> frozenset[str]:
    """The ``name`` of every option of a group, as Hydra composes it (listops_full's is listops)."""
    return frozenset(compose_config([f"{group}={path.stem}"])[group].name for path in (CONF / group).glob("*.yaml"))


def config_files():
    for group in sorted(p for p in CONF.iterdir() if p.is_dir()):
        for path in sorted(group.glob("*.yaml")):
            yield group.name, path.stem


@pytest.mark.parametrize("group, option", list(config_files()))
def test_every_config_file_composes(group, option):
    defaults = yaml.safe_load((CONF / "config.yaml").read_text())["defaults"]
    listed = {next(iter(d)) for d in defaults if isinstance(d, dict)}
    cfg = compose_config([f"{'' if group in listed else '+'}{group}={option}"])
    assert cfg.model.name and cfg.graph.name and cfg.dataset.name
    if group in ("model", "graph", "dataset"):
        assert cfg[group].name in names_of(group)


def test_the_top_level_configs_compose():
    assert compose_config([]).model.name == "transformer"
    assert "checkpoint" in compose_config([], config_name="evaluate")


def test_registries_and_conf_folders_agree():
    assert names_of("graph") == set(GRAPH_KINDS)
    assert names_of("model") == set(model_names())
    assert names_of("dataset") == set(dataset_names())


def literal_modules() -> dict[str, set[str]]:
    names = names_of("graph") | names_of("model") | names_of("dataset")
    found: dict[str, set[str]] = {}
    for path in CORE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.setdefault(node.value, set()).add(str(path.relative_to(ROOT)))
    return found


def test_each_name_is_a_literal_in_its_registry_only():
    found = literal_modules()
    spread = {n: sorted(m) for n, m in found.items() if len(m) > 1 and n not in EXEMPT}
    assert not spread, f"names written in more than one core module (only their registry may): {spread}"
    assert found["bpt"] == {"data/graphs/bpt.py"} and found["treelstm"] == {"models/recursive.py"}  # the check reads


def test_name_lists_outside_the_core_name_only_registered_things():
    """tools/results_table.py orders table rows and columns as the registries do (an unlisted name sorts
    after them), and conf/config.yaml's comments give examples: neither may hold a name the registries do not know."""
    from tools import results_table

    assert results_table.known_names() == {"model": tuple(model_names()), "graph": tuple(GRAPH_KINDS)}
    text = (CONF / "config.yaml").read_text()
    for group, known in (("graph", set(GRAPH_KINDS)), ("model", set(model_names()))):
        comment = re.search(rf"- {group}: \w+ +# any file of conf/{group}/ \((.*)\)", text).group(1)
        named = set(re.findall(r"[a-z_]+", comment.split(";")[0]))
        assert named and named <= known, comment


OUTSIDE = ("tools", "studies", "bench")
# module-level lists that are a study's design (which cells it ran or compares), not what the code accepts
DESIGNS = {
    "studies/soft_syntax/__init__.py: DATASETS": "the datasets the study ran, in its table's order",
    "studies/soft_syntax/__init__.py: FIGURE_PREFERENCE": "which finished run the bias figure shows",
    "studies/pretrained_graphs/__init__.py: TRANSFER": "the transfer the study scores (GLUE SST-2 -> binary SST)",
    "studies/pretrained_syntax/__init__.py: WORD_LEVEL_FAMILIES": "the trained models it reads attention of",
}


def name_lists(source: str, groups: dict[str, frozenset[str]]) -> list[tuple[int, str, list[str]]]:
    """``(line, where, names)`` of every list, tuple or set literal of two or more names of one group that is
    the value of a module-level assignment (``where``: its target) or a ``choices=`` or ``default=`` argument."""
    tree, found = ast.parse(source), []

    def check(node, where):
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            for names in groups.values():
                hits = [s for s in strings if s in names]
                if len(hits) >= 2:
                    found.append((node.lineno, where, hits))
                    return

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            check(stmt.value, ", ".join(ast.unparse(t) for t in targets))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in ("choices", "default"):
                    check(kw.value, f"{kw.arg}=")
    return found


def _groups() -> dict[str, frozenset[str]]:
    return {"graph": frozenset(GRAPH_KINDS), "model": frozenset(model_names()), "dataset": frozenset(dataset_names())}


def test_no_list_of_names_outside_the_registries():
    found = []
    for folder in OUTSIDE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for line, where, names in name_lists(path.read_text(), _groups()):
                if f"{rel}: {where}" not in DESIGNS:
                    found.append(f"{rel}:{line}: {where} {names}")
    assert not found, (
        "lists of registered names outside the registries (read them from data.graphs.GRAPH_KINDS, "
        f"models.model_names() or data.datasets.dataset_names()): {found}"
    )
    designs = {
        f"{p.relative_to(ROOT)}: {w}"
        for f in OUTSIDE
        for p in (ROOT / f).rglob("*.py")
        for _, w, _ in name_lists(p.read_text(), _groups())
    }
    assert set(DESIGNS) <= designs, f"DESIGNS names lists that are gone: {sorted(set(DESIGNS) - designs)}"


def test_the_name_list_scan_finds_a_planted_list():
    planted = (
        'GRAPHS = ("complete", "window")\n'
        "MODELS: list = ['gcn', 'gat', 'x']\n"
        'PAIR = ("transformer", "complete")  # one model and one graph: a cell, not a list\n'
        "def f(p):\n"
        '    p.add_argument("--d", choices={"sst", "trec"}, default=("sst",))\n'
        '    for g in ("complete", "tree"):  # inside a function: a study\'s loop over its cells\n'
        "        pass\n"
    )
    assert name_lists(planted, _groups()) == [
        (1, "GRAPHS", ["complete", "window"]),
        (2, "MODELS", ["gcn", "gat"]),
        (5, "choices=", ["sst", "trec"]),
    ]


def test_a_new_graph_is_accepted_outside_the_registries(star_graph):
    """Registered with a word-level rule, a graph is offered by tools.embed, studies.graph_probe and both
    benchmarks, and the hardware lottery's --graphs and --attn-graphs take any registered graph."""
    from bench import hardware_lottery, pretrained
    from studies import graph_probe
    from tools import embed

    args = hardware_lottery.build_parser().parse_args(["--graphs", "star", "--attn-graphs", "star", "--model", "gin"])
    assert args.graphs == args.attn_graphs == ["star"] and args.model == "gin"
    assert "star" in hardware_lottery.default_graphs() and "star" in hardware_lottery.default_attention_graphs()
    assert "star" not in embed.graph_names()  # no word_graph: it cannot be lifted to word pieces
    star = GRAPH_KINDS["star"]
    GRAPH_KINDS["star"] = dataclasses.replace(star, word_graph=GRAPH_KINDS["complete"].word_graph)
    try:
        for names in (embed.graph_names(), graph_probe.graph_names(), pretrained.graph_names()):
            assert names[-1] == "star" and names[0] == "complete", names
    finally:
        GRAPH_KINDS["star"] = star


@pytest.fixture
def star_graph(tmp_path):
    """The two files of a new graph: its module (tests/helpers/star_graph.py, which registers itself when
    imported, as data/graphs/__init__.py imports a module of data/graphs/) and conf/graph/star.yaml (here in a
    folder Hydra searches too)."""
    assert "star" not in GRAPH_KINDS
    importlib.import_module("tests.helpers.star_graph")
    (tmp_path / "conf" / "graph").mkdir(parents=True)
    (tmp_path / "conf" / "graph" / "star.yaml").write_text("name: star\nself_loops: true\n")
    yield tmp_path / "conf"
    del GRAPH_KINDS["star"], sys.modules["tests.helpers.star_graph"]


def test_a_toy_graph_added_through_two_files_trains(star_graph, tmp_path, tiny_overrides):
    from train import run

    g = GraphConstruction("star")([5, 6, 7, 8])
    assert sorted(zip(*(e.tolist() for e in g.edges()))) == sorted(
        [(0, 1), (0, 2), (0, 3), (1, 0), (2, 0), (3, 0)] + [(i, i) for i in range(4)]
    )
    cfg = compose_config([*tiny_overrides, "graph=star", f"hydra.searchpath=[file://{star_graph}]"])
    assert cfg.graph.name == "star"
    results = run(cfg, tmp_path / "run")
    assert results["graph"] == "star" and 0.0 <= results["test_acc"] <= 1.0
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["graph"] == "star" and saved["num_examples"]["train"] == 256


def test_a_new_module_of_data_graphs_registers_without_being_listed(tmp_path):
    """The first of the two files, where it goes: a copy of data/ with data/graphs/star.py added (the toy graph's
    module, unchanged) knows graph=star once data.graphs is imported, after the built-in graphs."""
    import shutil
    import subprocess

    shutil.copytree(ROOT / "data", tmp_path / "data", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "tests" / "helpers" / "star_graph.py", tmp_path / "data" / "graphs" / "star.py")
    code = "from data.graphs import GRAPHS, GraphConstruction; print(*GRAPHS); print(GraphConstruction('star').name)"
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[:2] == [" ".join([*GRAPH_KINDS, "star"]), "star"]


@pytest.fixture
def first_token_dataset(tmp_path):
    """The two files of a new dataset: its module (tests/helpers/toy_dataset.py, which registers itself when
    imported, as a module of data/ is when the dataset registry imports them) and its YAML."""
    from data.datasets import DATASETS

    assert "first_token" not in DATASETS
    importlib.import_module("tests.helpers.toy_dataset")
    (tmp_path / "conf" / "dataset").mkdir(parents=True)
    (tmp_path / "conf" / "dataset" / "first_token.yaml").write_text(
        "name: first_token\nnum_train: 400\nnum_val: 100\nnum_test: 100\nmax_length: 12\nseed: 0\n"
    )
    yield tmp_path / "conf"
    del DATASETS["first_token"], sys.modules["tests.helpers.toy_dataset"]


def test_a_toy_dataset_added_through_two_files_trains_and_learns(first_token_dataset, tmp_path):
    from train import run

    overrides = ["dataset=first_token", f"hydra.searchpath=[file://{first_token_dataset}]", "logger=none"]
    cfg = compose_config(overrides + ["graph=tree", "model=gcn", "model.readout=root", "trainer.progress=false"])
    cfg.trainer.max_epochs, cfg.model.hidden_dim, cfg.model.num_layers = 3, 32, 1
    results = run(cfg, tmp_path / "run")
    assert results["dataset"] == "first_token" and results["num_examples"] == {"train": 400, "val": 100, "test": 100}
    assert results["test_acc"] >= 0.9  # the root token is the answer: read out at the root, it is learnt


@pytest.fixture
def bag_family(tmp_path):
    """The two files of a new model family: its module (tests/helpers/toy_family.py, registered here) and its YAML."""
    from models import MODEL_FAMILIES
    from models.registry import ModelFamily, register_family
    from tests.helpers.toy_family import Bag, BagConfig

    register_family(ModelFamily("bag", ("bag",), BagConfig, Bag, "mean of embeddings", memory="one_pass"))
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "bag.yaml").write_text("name: bag\nhidden_dim: 16\n")
    yield tmp_path / "conf"
    del MODEL_FAMILIES["bag"]


def test_a_toy_model_family_added_through_two_files_trains(bag_family, tmp_path, tiny_overrides):
    from train import run

    cfg = compose_config([*tiny_overrides, "model=bag", f"hydra.searchpath=[file://{bag_family}]"])
    assert set(cfg.model) >= {"name", "hidden_dim"} and "ffn" not in cfg.model  # only its own keys (and debug's)
    results = run(cfg, tmp_path / "run")
    # vocab 19, 10 classes, debug=tiny's hidden_dim=32 over the YAML's 16
    assert results["model"] == "bag" and results["num_params"] == 19 * 32 + 32 * 10 + 10


def test_a_toy_family_and_a_toy_dataset_added_by_the_recipe_train_together(
    bag_family, first_token_dataset, tmp_path, tiny_overrides
):
    """docs/configuration.md's "How to add": a model family (its module and conf/model YAML) and a dataset
    (its module and conf/dataset YAML), each registered and nothing else edited, train together with
    debug=tiny, and evaluate.py rebuilds the run from its checkpoint alone."""
    import torch

    from train import run

    assert bag_family == first_token_dataset  # both fixtures' YAML lie in the one folder Hydra searches
    cfg = compose_config(
        [*tiny_overrides, "model=bag", "dataset=first_token", f"hydra.searchpath=[file://{bag_family}]"]
    )
    results = run(cfg, tmp_path / "run")
    assert (results["model"], results["dataset"]) == ("bag", "first_token")
    assert results["num_examples"] == {"train": 256, "val": 64, "test": 64}  # debug=tiny's sizes over the YAML's
    best = torch.load(tmp_path / "run" / "checkpoints" / "best.pt", weights_only=False)
    vocab = len(best["vocab"])  # the specials, 0 and 1
    assert results["num_params"] == vocab * 32 + 32 * 2 + 2  # debug=tiny's hidden_dim, the dataset's 2 classes
    assert rescored_test_acc(tmp_path / "run", tmp_path / "eval") == results["test_acc"]
