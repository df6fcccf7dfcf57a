"""The registries own their facts: model families, their typed configs, and what old configs become."""

import pytest
import torch
from omegaconf import OmegaConf

from data.graphs import GraphConstruction
from engine.checkpoint import upgrade_config
from models import MODEL_FAMILIES, build_model, family_of, model_config, model_names
from models.registry import ModelFamily, register_family
from tests.conftest import CONF, compose_config

MODEL_FILES = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))


def test_every_model_yaml_names_a_registered_model_and_every_model_has_a_yaml():
    assert sorted(model_names()) == MODEL_FILES


@pytest.mark.parametrize("name", MODEL_FILES)
def test_each_model_yaml_carries_exactly_its_familys_keys(name):
    from dataclasses import fields

    model = compose_config([f"model={name}"]).model
    wanted = {f.name for f in fields(family_of(name).config)}
    assert set(model) == wanted, f"conf/model/{name}.yaml: extra {set(model) - wanted}, missing {wanted - set(model)}"
    config = model_config(model)  # typed and checked
    assert config.name == name and type(config) is family_of(name).config


def test_unknown_model_is_refused_in_one_place_with_the_valid_names():
    cfg = compose_config(["model=gat"])
    cfg.model.name = "lstm"
    with pytest.raises(ValueError, match="unknown model 'lstm'; valid models: gcn, .*treelstm, recursive"):
        model_config(cfg.model)
    with pytest.raises(ValueError, match="unknown model 'lstm'"):
        build_model(cfg.model, 10, 2)


def test_typed_config_checks_each_value_once_and_names_a_missing_key():
    cfg = OmegaConf.to_container(compose_config(["model=transformer"]).model)
    with pytest.raises(ValueError, match="unknown model.norm 'mid'; valid: pre, post"):
        model_config({**cfg, "norm": "mid"})
    with pytest.raises(ValueError, match="model.num_layers must be an integer >= 1, got 0"):
        model_config({**cfg, "num_layers": 0})
    with pytest.raises(ValueError, match="hidden_dim=30 must be divisible by model.num_heads=4"):
        model_config({**cfg, "hidden_dim": 30})
    model_config({**cfg, "name": "sum", "hidden_dim": 30})  # no heads to split: fine
    del cfg["impl"]
    with pytest.raises(ValueError, match="model.impl is missing from the config of model=transformer"):
        model_config(cfg)


def test_a_new_family_is_one_registry_entry(tmp_path):
    """A family that brings its own tokenizer registers like the others and builds through build_model."""
    from tests.helpers.toy_family import Bag, BagConfig

    family = ModelFamily(
        "bag", ("bag_of_pieces",), BagConfig, Bag, memory="one_pass", own_tokenizer=True, graphs_on_own_tokens=True
    )
    register_family(family)
    try:
        assert family_of("bag_of_pieces").own_tokenizer
        model = build_model({"name": "bag_of_pieces", "hidden_dim": 8}, 30, 3, GraphConstruction("complete"))
        assert model.out.out_features == 3
        with pytest.raises(ValueError, match="already belong to another family"):
            register_family(ModelFamily("other", ("bag_of_pieces",), BagConfig, Bag, memory="one_pass"))
    finally:
        del MODEL_FAMILIES["bag"]
    assert "bag_of_pieces" not in model_names()


def test_upgrade_config_makes_an_old_treelstm_config_equal_to_todays():
    """A Tree-LSTM config written before its YAML stopped carrying the encoder's keys resumes and compares equal."""
    old = torch.load(CONF.parent / "tests" / "fixtures" / "old_checkpoints" / "treelstm.pt", weights_only=True)[
        "config"
    ]
    assert "num_heads" in old["model"]  # the old layout: 20 keys, 5 used
    now = OmegaConf.to_container(compose_config(["debug=tiny", "model=treelstm", "graph=tree", "logger=none"]))
    now["model"]["hidden_dim"] = 16
    assert "num_layers" in now["model"]  # debug=tiny sets it for every model; the Tree-LSTM ignores it
    assert upgrade_config(old)["model"] == upgrade_config(now)["model"]
    assert set(upgrade_config(now)["model"]) == {
        "name",
        "cell",
        "hidden_dim",
        "dropout",
        "readout",
        "embeddings",
        "glove_freeze",
    }
    # a key the code later added is filled as the code behaved before it (not with today's YAML default)
    enc = OmegaConf.to_container(compose_config(["model=transformer"]).model)
    del enc["impl"], enc["dense_min_density"]
    assert upgrade_config({"model": enc})["model"]["impl"] == "sparse"


def test_register_family_refuses_a_family_that_misses_the_contract():
    """models.registry's protocols are checked when a family registers: one line names what is missing."""
    from dataclasses import dataclass

    from tests.helpers.toy_family import Bag, BagConfig

    def refused(family) -> str:
        with pytest.raises(ValueError) as info:
            register_family(family)
        assert family.name not in MODEL_FAMILIES and "\n" not in str(info.value)
        return str(info.value)

    # counted per layer by the memory plan, a bag has no layers to count
    assert refused(ModelFamily("bag", ("bag",), BagConfig, Bag)) == (
        "model family 'bag': its config BagConfig lacks 'num_layers', which models.registry.LayeredConfig "
        "requires (memory='layers')"
    )

    @dataclass(frozen=True)
    class NoImpl:
        name: str
        hidden_dim: int

        @classmethod
        def from_mapping(cls, cfg):
            return cls(cfg["name"], cfg["hidden_dim"])

        def check(self, graph):
            pass

    assert "its config NoImpl lacks 'impl'" in refused(ModelFamily("bag", ("bag",), NoImpl, Bag, memory="one_pass"))

    class Unmarked(torch.nn.Module):  # sets no impl for evaluate.py and the placement to read
        def __init__(self, config, vocab_size, num_classes, construction=None):
            super().__init__()

    assert "its model Unmarked lacks 'impl'" in refused(
        ModelFamily("bag", ("bag",), BagConfig, Unmarked, memory="one_pass")
    )

    def build(config, vocab_size, num_classes, construction=None):  # no return annotation: nothing to check
        return Bag(config, vocab_size, num_classes)

    assert "annotated with the class it returns" in refused(
        ModelFamily("bag", ("bag",), BagConfig, build, memory="one_pass")
    )
    assert set(MODEL_FAMILIES) == {"encoder", "recursive", "minilm"}  # and the built-in families meet it
