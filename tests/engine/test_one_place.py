"""One place for each thing: every graph, model and dataset is one registry entry plus its YAML.

* every config file composes;
* every name of conf/graph, conf/model and conf/dataset is a string literal in at most one core module
  (its registry), so nothing else branches on it;
* lists of names outside the core (tools/results_table.py, conf/config.yaml's comment) match the registries;
* a toy graph added by exactly the two-file path (its code, registered; its YAML) trains with debug=tiny.
"""

import ast
import functools
import json
import re

import pytest
import yaml

from data.datasets import dataset_names
from data.graphs import GRAPH_KINDS, Built, GraphConstruction, GraphKind, register_graph
from models import model_names
from tests.conftest import CONF, ROOT, compose_config, rescored_test_acc

CORE = sorted([*ROOT.glob("data/*.py"), *ROOT.glob("models/*.py"), *ROOT.glob("engine/*.py")]) + [
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
    assert "data/graphs.py" in found["bpt"] and found["treelstm"] == {"models/recursive.py"}  # the check reads


def test_name_lists_outside_the_core_name_only_registered_things():
    """tools/results_table.py's lists only order table rows and columns (an unlisted name sorts after them),
    and conf/config.yaml's comments give examples: neither may hold a name the registries do not know."""
    from tools import results_table

    assert set(results_table.GRAPHS) <= set(GRAPH_KINDS)
    assert set(results_table.MODELS) <= set(model_names())
    text = (CONF / "config.yaml").read_text()
    for group, known in (("graph", set(GRAPH_KINDS)), ("model", set(model_names()))):
        comment = re.search(rf"- {group}: \w+ +# any file of conf/{group}/ \((.*)\)", text).group(1)
        named = set(re.findall(r"[a-z_]+", comment.split(";")[0]))
        assert named and named <= known, comment


def _star(construction: GraphConstruction, n: int, heads, tree) -> Built:
    """Every token hears the first, and the first hears every token (plus self loops)."""
    import torch

    others = torch.arange(1, n)
    src = torch.cat([torch.zeros(n - 1, dtype=torch.long), others])
    dst = torch.cat([others, torch.zeros(n - 1, dtype=torch.long)])
    if construction.self_loops:
        src, dst = torch.cat([src, torch.arange(n)]), torch.cat([dst, torch.arange(n)])
    return Built(src, dst)


@pytest.fixture
def star_graph(tmp_path):
    """The two files of a new graph: its code (here registered from the test) and conf/graph/star.yaml
    (here in a folder Hydra searches too)."""
    register_graph(GraphKind("star", _star, "every token linked to the first"))
    (tmp_path / "conf" / "graph").mkdir(parents=True)
    (tmp_path / "conf" / "graph" / "star.yaml").write_text("name: star\nself_loops: true\n")
    yield tmp_path / "conf"
    del GRAPH_KINDS["star"]


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


def _first_token_splits(cfg, progress=True):
    """A toy task: the label is the first token (0 or 1) of a random string of 0s and 1s; a chain as its tree."""
    import random

    import datasets

    rng, out = random.Random(int(cfg["seed"])), {}
    for split in ("train", "val", "test"):
        rows = []
        for _ in range(int(cfg[f"num_{split}"])):
            tokens = [rng.choice("01") for _ in range(rng.randint(2, int(cfg["max_length"])))]
            heads = [-1] + list(range(len(tokens) - 1))
            rows.append({"tokens": tokens, "label": int(tokens[0]), "heads": heads, "length": len(tokens)})
        out[split] = datasets.Dataset.from_list(rows)
    return out


@pytest.fixture
def first_token_dataset(tmp_path):
    """The two files of a new dataset: its module (here registered from the test) and its YAML."""
    from data.datasets import DATASETS, DatasetEntry, register_dataset

    register_dataset(DatasetEntry("first_token", _first_token_splits, None, "the first of 0/1 tokens", num_classes=2))
    (tmp_path / "conf" / "dataset").mkdir(parents=True)
    (tmp_path / "conf" / "dataset" / "first_token.yaml").write_text(
        "name: first_token\nnum_train: 400\nnum_val: 100\nnum_test: 100\nmax_length: 12\nseed: 0\n"
    )
    yield tmp_path / "conf"
    del DATASETS["first_token"]


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
