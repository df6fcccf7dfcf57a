"""docs/configuration.md's "How to add", followed word for word, side by side: a graph, an aggregator, a model
family, a dataset and a study, each a toy of tests/helpers/ put where its recipe says in a copy of the repository
(nothing else edited but the lines the recipe names), then trained there with ``python train.py debug=tiny``
(the study: run with ``python -m studies.<name>``). Each failed with its registration step left out (the
register line, the AGGREGATORS entry, the ``__main__.py``): the run refuses the unknown name in one line.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT

HELPERS = ROOT / "tests" / "helpers"
RECIPES = (ROOT / "docs" / "configuration.md").read_text()
# what a training run reads: the entry script, the packages it imports, the configs
RUN_NEEDS = ("train.py", "evaluate.py", "data", "models", "engine", "conf")


@pytest.fixture
def repo(tmp_path) -> Path:
    """A copy of what ``python train.py`` needs, to add files to as a reader would."""
    for name in RUN_NEEDS:
        src, dst = ROOT / name, tmp_path / "repo" / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    return tmp_path / "repo"


def recipe(kind: str) -> str:
    """The paragraph of docs/configuration.md's "How to add" that starts with ``**<kind>``."""
    (text,) = re.findall(rf"^\*\*{kind}.*?(?=\n\n)", RECIPES, re.S | re.M)
    return " ".join(text.split())


def python(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TAGNN_CACHE_DIR": str(repo / ".cache"), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # the copy's packages, not the repository's
    return subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def train(repo: Path, *overrides: str) -> dict:
    """``python train.py debug=tiny <overrides>`` in the copy; its results.json."""
    out = repo / "run"
    res = python(
        repo, "train.py", "debug=tiny", "logger=none", "trainer.progress=false", f"hydra.run.dir={out}", *overrides
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_a_graph_is_its_module_and_its_yaml(repo):
    steps = recipe("A graph")
    assert "A new module `data/graphs/<name>.py`" in steps and "`conf/graph/<name>.yaml`: `name: <name>`" in steps
    assert "The toy: `tests/helpers/star_graph.py` as `data/graphs/star.py`" in steps
    shutil.copy(HELPERS / "star_graph.py", repo / "data" / "graphs" / "star.py")
    (repo / "conf" / "graph" / "star.yaml").write_text("name: star\nself_loops: true\n")
    results = train(repo, "graph=star")
    assert results["graph"] == "star" and results["num_examples"]["train"] == 256


@pytest.mark.slow
def test_an_aggregator_is_its_module_two_lines_of_the_package_and_its_yaml(repo):
    steps = recipe("An aggregator")
    assert "A new module `models/aggregators/<name>.py`" in steps
    assert '`from models.aggregators.<name> import <Class>` and the entry `"<name>": <Class>,` in `AGGREGATORS`' in (
        steps
    )
    assert "`defaults: [/encoder/default@_here_, _self_]` and `name: <name>`" in steps
    assert "The toy: `tests/helpers/toy_aggregator.py` as `models/aggregators/rootsum.py`" in steps
    shutil.copy(HELPERS / "toy_aggregator.py", repo / "models" / "aggregators" / "rootsum.py")
    package = repo / "models" / "aggregators" / "__init__.py"
    text = package.read_text()
    last_import = "from models.aggregators.transformer import DotProductAttention\n"
    text = text.replace(last_import, last_import + "from models.aggregators.rootsum import RootSumAggregation\n")
    text = text.replace("AGGREGATORS = {\n", 'AGGREGATORS = {\n    "rootsum": RootSumAggregation,\n')
    package.write_text(text)
    (repo / "conf" / "model" / "rootsum.yaml").write_text(
        "defaults:\n  - /encoder/default@_here_\n  - _self_\n\nname: rootsum\n"
    )
    results = train(repo, "model=rootsum", "model.impl=auto")
    assert results["model"] == "rootsum" and results["num_params"] > 0


def test_the_toy_aggregator_s_two_paths_agree():
    """What tests/models/test_dense.py checks of every aggregator, on the toy: sparse == dense."""
    import dgl

    from models.dense import to_dense
    from tests.helpers.toy_aggregator import RootSumAggregation

    torch.manual_seed(0)
    g = dgl.batch([dgl.graph(([0, 1, 2, 0], [1, 2, 0, 0]), num_nodes=4), dgl.graph(([0, 1], [1, 0]), num_nodes=2)])
    agg, h = RootSumAggregation(8), torch.randn(6, 8)
    dg = to_dense(g, "cpu")
    sparse, dense = agg(g, h), dg.unpad(agg.forward_dense(dg.pad(h), dg))
    assert torch.allclose(sparse, dense, atol=1e-6)
    # node 0 of the first graph hears 2 and itself: (h_2 + h_0) / sqrt(2)
    assert torch.allclose(sparse[0], agg.linear((h[2] + h[0]) / 2**0.5), atol=1e-6)
    with pytest.raises(ValueError, match="model=rootsum reads no edge types: set model.edge_types=false"):
        RootSumAggregation(8, edge_types=6)


def family_module() -> str:
    """tests/helpers/toy_family.py with the register_family line the recipe asks for."""
    steps = recipe("A model family")
    assert '`register_family(ModelFamily("name", models=("model_name",), config=..., build=..., memory=...))`' in (
        steps
    )
    assert "The toy: `tests/helpers/toy_family.py` and its `register_family` line as `models/bag.py`" in steps
    return (HELPERS / "toy_family.py").read_text() + (
        "\n\nfrom models.registry import ModelFamily, register_family  # noqa: E402\n\n"
        'register_family(ModelFamily("bag", models=("bag",), config=BagConfig, build=Bag, memory="one_pass"))\n'
    )


@pytest.mark.slow
def test_a_model_family_is_its_module_and_its_yaml(repo):
    (repo / "models" / "bag.py").write_text(family_module())
    (repo / "conf" / "model" / "bag.yaml").write_text("name: bag\nhidden_dim: 16\n")
    results = train(repo, "model=bag")
    # vocab 19, 10 classes, debug=tiny's hidden_dim=32 over the YAML's 16
    assert results["model"] == "bag" and results["num_params"] == 19 * 32 + 32 * 10 + 10


@pytest.mark.slow
def test_a_dataset_is_its_module_and_its_yaml(repo):
    steps = recipe("A dataset")
    assert 'A module in `data/` with a function `(cfg, progress) -> {"train", "val", "test": datasets.Dataset}`' in (
        steps
    )
    assert '`register_dataset(DatasetEntry("name", load, read_file, "description", num_classes=...))`' in steps
    assert "The toy: `tests/helpers/toy_dataset.py` as `data/first_token.py`" in steps
    shutil.copy(HELPERS / "toy_dataset.py", repo / "data" / "first_token.py")
    (repo / "conf" / "dataset" / "first_token.yaml").write_text(
        "name: first_token\nnum_train: 400\nnum_val: 100\nnum_test: 100\nmax_length: 12\nseed: 0\n"
    )
    results = train(repo, "dataset=first_token", "graph=tree", "model=gcn", "model.readout=root")
    assert results["dataset"] == "first_token"
    assert results["num_examples"] == {"train": 256, "val": 64, "test": 64}  # debug=tiny's sizes over the YAML's


def test_a_study_is_three_files_and_runs_as_a_module(repo):
    steps = recipe("A study")
    assert "Three new files in `studies/<name>/`" in steps and "`sys.exit(main())`" in steps
    assert "`REPLAYS = [Table(" in steps
    assert "The toy: `tests/helpers/toy_study/` as `studies/toy_study/`" in steps
    (repo / "studies").mkdir()
    shutil.copy(ROOT / "studies" / "__init__.py", repo / "studies" / "__init__.py")
    shutil.copytree(HELPERS / "toy_study", repo / "studies" / "toy_study", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tools", repo / "tools", ignore=shutil.ignore_patterns("__pycache__"))  # Table, replay
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    assert sorted(p.name for p in (repo / "studies" / "toy_study").iterdir()) == [
        "README.md",
        "__init__.py",
        "__main__.py",
    ]
    readme = (repo / "studies" / "toy_study" / "README.md").read_text()
    (written,) = re.findall(r"^- `(docs/results/[^`]+)`", readme, re.M)
    (command,) = re.findall(r"^(python -m studies\.toy_study.*)$", readme, re.M)
    res = python(repo, *command.split()[1:])
    assert res.returncode == 0, res.stderr[-2000:]
    page = (repo / written).read_text()
    assert written == "docs/results/toy_study.md" and "| none | 5 |" in page and "| complete | 25 |" in page
    from tests.helpers.toy_study import table_from_json

    assert page == table_from_json(json.loads((repo / "docs" / "results" / "toy_study.json").read_text()))
    # tools.check_docs replays the page: the declared table renders, from the JSON, what the study wrote
    check = "from pathlib import Path; from tools import replay; (t,) = replay.declared(); print(t.table, t.want(Path('.')) == Path(t.table).read_text().splitlines())"
    res = python(repo, "-c", check)
    assert res.returncode == 0 and res.stdout.split() == ["docs/results/toy_study.md", "True"], res.stderr[-2000:]


CITED_METHOD = re.compile(r"^([A-Z]\w*)\.(\w+)$")  # `DotProductAttention.forward`


def check_cited_code(module_name: str, cells: str) -> list[str]:
    """The `Class.method` names ``cells`` cites, each checked to exist in ``module_name``; every other backticked
    snippet after one (not a shape like `(B, H, n, n)`) names calls of that method: each identifier in it must
    appear in the method's source. Returns the methods cited, as ``Class.method``."""
    import importlib
    import inspect

    module = importlib.import_module(module_name)
    cited, source = [], None
    for snippet in re.findall(r"`([^`]+)`", cells):
        if match := CITED_METHOD.match(snippet):
            cls = getattr(module, match[1], None)
            assert cls is not None, f"{module_name} has no {match[1]} ({snippet})"
            method = getattr(cls, match[2], None)
            assert callable(method), f"{module_name}.{match[1]} has no method {match[2]} ({snippet})"
            source = inspect.getsource(method)
            cited.append(snippet)
        elif source is not None and not snippet.startswith("("):
            for name in re.findall(r"[A-Za-z_]\w*", snippet):
                assert re.search(rf"\b{name}\b", source), f"{cited[-1]} does not call `{name}` (cited as `{snippet}`)"
    return cited


def test_the_docs_cite_each_equation_s_code_by_a_name_that_exists_and_calls_what_they_say():
    """docs/architecture.md's aggregator table names, per module, the method of each path (``forward``,
    ``forward_dense``, and those it names beside them) and the calls each makes; README's equation table names
    ``forward``. Each named method must exist and call what its cell cites; the code is cited by name, never by
    line numbers, so an edit inside a method (a comment line) changes nothing here, and renaming one fails here."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page[page.index("## Where each equation lives") :]
    section = section[: section.index("\n## ", 4)]
    assert not re.search(r"\blines? \d+", section), "cite code by name (Class.method), not by line numbers"
    rows = re.findall(r"^\| `(\w+)\.py` \|[^|]*\|([^|]*)\|([^|]*)\|$", section, re.M)
    assert [r[0] for r in rows] == ["transformer", "gat", "gcn", "pooling", "gin"]
    classes = {}
    for module, sparse, dense in rows:
        if module == "gin":  # "as `pooling.py`": GIN is pooling's sum
            assert "as `pooling.py`" in sparse and "as `pooling.py`" in dense
            continue
        sparse_cited = check_cited_code(f"models.aggregators.{module}", sparse)
        dense_cited = check_cited_code(f"models.aggregators.{module}", dense)
        assert sparse_cited[0].endswith(".forward") and dense_cited[0].endswith(".forward_dense"), module
        classes[module] = sparse_cited[0].split(".")[0]
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Where each equation lives") :]
    section = section[: section.index("\n## ", 4)]
    assert not re.search(r"\blines? \d+", section), "cite code by name (Class.method), not by line numbers"
    cited = re.findall(
        r"^\|[^|]*\| `(\w+)`:([^|]*)\| \[`models/aggregators/(\w+)\.py`\]\([^)]*\), `(\w+\.\w+)` \|$", section, re.M
    )
    assert [c[2] for c in cited] == ["transformer", "gat", "gcn"]
    for cls, calls, module, method in cited:
        assert method == f"{cls}.forward" and classes[module] == cls, method
        assert check_cited_code(f"models.aggregators.{module}", f"`{method}` {calls}") == [method]
