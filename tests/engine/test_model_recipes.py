"""A model family brings its training recipe (issue 31): ``model=minilm`` alone composes the fine-tuning recipe
its committed results used (conf/experiment/pretrained_graphs.yaml), an explicit override still wins, the
scratch families keep optim=adamw and trainer=default, and no experiment composes differently because of it."""

import itertools
import shlex

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import CONF, compose_config

EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
SCRATCH = sorted(p.stem for p in (CONF / "model").glob("*.yaml") if p.stem != "minilm")


def plain(cfg, key):
    return OmegaConf.to_container(cfg[key], resolve=True)


def test_minilm_composes_the_recipe_of_its_committed_results():
    cfg = compose_config(["model=minilm"])
    published = yaml.safe_load((CONF / "experiment" / "pretrained_graphs.yaml").read_text())
    assert plain(cfg, "optim") == {"name": "adamw", **published["optim"]}
    assert (cfg.optim.lr, cfg.optim.schedule, cfg.optim.warmup_ratio) == (3e-5, "linear", 0.1)
    assert (cfg.trainer.batch_size, cfg.trainer.max_epochs) == (32, 2)
    assert (cfg.trainer.batch_size, cfg.trainer.max_epochs) == (
        published["trainer"]["batch_size"],
        published["trainer"]["max_epochs"],
    )


@pytest.mark.parametrize(
    "override,key,value",
    [
        ("optim.lr=1e-4", "optim.lr", 1e-4),
        ("trainer.batch_size=8", "trainer.batch_size", 8),
        ("trainer.max_epochs=5", "trainer.max_epochs", 5),
        ("optim=adagrad", "optim.name", "adagrad"),
        ("optim=adamw", "optim.lr", 1e-3),
    ],
)
def test_command_line_beats_the_model_recipe(override, key, value):
    cfg = compose_config(["model=minilm", override])
    assert OmegaConf.select(cfg, key) == value
    assert cfg.model.name == "minilm"


@pytest.mark.parametrize("model", SCRATCH)
def test_scratch_families_keep_adamw_and_the_default_trainer(model):
    cfg = compose_config([f"model={model}"])
    assert plain(cfg, "optim") == OmegaConf.to_container(OmegaConf.load(CONF / "optim" / "adamw.yaml"))
    assert plain(cfg, "trainer") == OmegaConf.to_container(OmegaConf.load(CONF / "trainer" / "default.yaml"))


def without_recipe(overrides):
    """What ``overrides`` composed to before models brought recipes: the command line forces the old groups."""
    return compose_config([*overrides, "optim=adamw", "trainer=default"])


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes_as_before(name):
    """An experiment sets what it needs on top of optim=adamw/trainer=default; a model's recipe changes none."""
    assert compose_config([f"experiment={name}"]) == without_recipe([f"experiment={name}"])


def grid_cells(name):
    lines = yaml.safe_load((CONF / "experiment" / f"{name}.yaml").read_text()).get("experiment_grids") or []
    for line in lines:
        choices = [[f"{k}={v}" for v in vals.split(",")] for k, vals in (t.split("=", 1) for t in shlex.split(line))]
        yield from (list(cell) for cell in itertools.product(*choices))


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_grid_cell_composes_as_before(name):
    cells = list(grid_cells(name))
    assert cells or name not in ("pretrained_graphs", "graph_choice")
    for cell in cells:
        overrides = [f"experiment={name}", *cell]
        assert compose_config(overrides) == without_recipe(overrides), cell
