"""The model families: one :class:`ModelFamily` entry per kind of model, registered by the module that
defines it (``models/encoder.py``: the synchronous encoder, one model name per aggregator;
``models/recursive.py``: the recursive tree models). ``models/__init__.py`` imports every module of the
package, so a new family is its module (with its ``register_family`` call) and its conf/model YAML.

A family says which ``model.name`` values it serves, the typed config its YAML fills (a dataclass with a
``from_mapping`` that checks every value once), how to build the model, and what the rest of the code
must know about it: how a training step uses memory, and whether it brings its own tokenizer and
vocabulary (a pretrained model does) and builds its graphs on its own tokens.

The contract a family meets is written below as three protocols: :class:`ModelConfig` (every family's
config), :class:`LayeredConfig` (a family whose memory the plan counts per layer, ``memory="layers"``) and
:class:`Model` (what its build returns). :func:`register_family` checks them and refuses, in one line naming
it, a family whose config or model lacks an attribute the rest of the code reads.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Protocol

import yaml

from data.graphs import make_construction as word_construction


class ModelConfig(Protocol):
    """What every family's typed config exposes (a frozen dataclass of exactly its YAML's keys, plus
    constants of the family as class attributes)."""

    name: str  # model.name
    impl: str  # sparse | dense | auto | torch_sparse: how it computes a batch (models/impl.py), read by train.py
    hidden_dim: int  # the width engine/memory.py counts per node

    @classmethod
    def from_mapping(cls, mapping: Mapping) -> ModelConfig:
        """The typed config of ``model:`` (YAML or a checkpoint's); checks every value, names a missing key."""
        ...

    def check(self, graph) -> None:
        """Rules between this config and the graph construction (a ``data.graphs.GraphKind``)."""
        ...


class LayeredConfig(ModelConfig, Protocol):
    """A config of a family with ``memory="layers"``: engine/memory.py counts L rounds over the edges, and
    foresees the dense path as ``models.impl.choose_impl`` takes it."""

    num_layers: int
    num_heads: int
    dense_min_density: float  # impl=auto on the CPU: dense when edges fill at least this share of the pairs


class Model(Protocol):
    """What a family's build returns: an ``nn.Module`` taking a batched graph, with the impl it runs
    (``evaluate.py impl=...`` sets it; ``models.impl.choose_impl`` decides each batch by it)."""

    impl: str

    def forward(self, g, *args, **kwargs): ...


def declared(cls: type) -> set[str]:
    """The attributes an instance of ``cls`` has for sure: its class attributes and methods, its dataclass
    fields and the annotations of its class body (and its bases')."""
    names = set(dir(cls)) | ({f.name for f in fields(cls)} if is_dataclass(cls) else set())
    for base in cls.__mro__:
        names |= set(vars(base).get("__annotations__", {}))
    return names


def required(protocol: type) -> list[str]:
    """The attributes and methods ``protocol`` names, in the order written (its bases' first)."""
    out: list[str] = []
    for base in reversed(protocol.__mro__):
        if base in (Protocol, object, typing.Generic) or not getattr(base, "_is_protocol", False):
            continue
        own = [*vars(base).get("__annotations__", {})]
        own += [k for k, v in vars(base).items() if callable(v) or isinstance(v, classmethod)]
        out += [k for k in own if not k.startswith("_") and k not in out]
    return out


def model_class(build: Callable) -> type | None:
    """The model class a family's build returns: the build itself when it is a class, else its return annotation."""
    if isinstance(build, type):
        return build
    try:
        returned = typing.get_type_hints(build).get("return")
    except NameError:
        return None
    return returned if isinstance(returned, type) else None


@dataclass(frozen=True)
class ModelFamily:
    """A kind of model. Its config class meets :class:`ModelConfig` (:class:`LayeredConfig` for
    ``memory="layers"``) and its build returns a :class:`Model`; :func:`register_family` checks both."""

    name: str
    models: tuple[str, ...]  # the model.name values it serves
    config: type  # its typed config: a dataclass with from_mapping(mapping, model) and check(graph_kind)
    build: Callable  # (config, vocab_size, num_classes, construction) -> nn.Module
    description: str = ""
    # how engine/memory.py estimates a step: layers (L rounds over the edges) | one_pass (one pass over the
    # nodes: a tree walk, a bag of embeddings)
    memory: str = "layers"
    own_tokenizer: bool = False  # brings its own tokenizer and vocabulary (a pretrained model)
    graphs_on_own_tokens: bool = False  # its graphs are built over its own tokens (word pieces), not words
    # for graphs_on_own_tokens: (typed config, graph config) -> the construction that turns a sentence's words into a
    # graph on its tokens (data.wordpiece.PieceConstruction: tokenise, then lift the word-level graph)
    construction: Callable | None = None
    # its builder gets the Vocab itself (tokens, training counts) in place of vocab_size, when the caller has
    # one: model.embeddings=glove looks its words up (models/embeddings.py)
    takes_vocab: bool = False


MODEL_FAMILIES: dict[str, ModelFamily] = {}


def check_family(family: ModelFamily) -> None:
    """Refuse, in one line naming it, the first attribute of the contract its config or model lacks."""
    wanted = LayeredConfig if family.memory == "layers" else ModelConfig
    for protocol, cls, what in (
        (wanted, family.config, "config"),
        (Model, model_class(family.build), "model"),
    ):
        if cls is None:
            raise ValueError(
                f"model family {family.name!r}: its build must be the model class or be annotated with the class "
                "it returns (-> MyModel), so that the model's attributes can be checked"
            )
        missing = [name for name in required(protocol) if name not in declared(cls)]
        if missing:
            raise ValueError(
                f"model family {family.name!r}: its {what} {cls.__name__} lacks {missing[0]!r}, which "
                f"models.registry.{protocol.__name__} requires (memory={family.memory!r})"
            )


def register_family(family: ModelFamily) -> ModelFamily:
    check_family(family)
    clash = [m for f in MODEL_FAMILIES.values() if f.name != family.name for m in f.models if m in family.models]
    if clash:
        raise ValueError(f"model names {clash} already belong to another family")
    MODEL_FAMILIES[family.name] = family
    return family


def model_names() -> tuple[str, ...]:
    return tuple(m for f in MODEL_FAMILIES.values() for m in f.models)


def family_of(name: str) -> ModelFamily:
    """The family serving ``model.name=name``; the one place an unknown model name is refused."""
    for family in MODEL_FAMILIES.values():
        if name in family.models:
            return family
    raise ValueError(f"unknown model {name!r}; valid models: {', '.join(model_names())}")


def typed_fields(config_type: type, mapping: Mapping) -> dict:
    """The values of ``config_type``'s fields from ``mapping``, each present (one line names a missing one)."""
    out = {}
    for f in fields(config_type):
        if f.name not in mapping:
            raise ValueError(
                f"model.{f.name} is missing from the config of model={mapping.get('name')}: "
                f"add it to conf/model/{mapping.get('name')}.yaml"
            )
        value = mapping[f.name]
        if f.type in ("float", float) and isinstance(value, int | float) and not isinstance(value, bool):
            value = float(value)
        elif f.type in ("bool", bool) and isinstance(value, int):
            value = bool(value)
        out[f.name] = value
    return out


def model_config(mapping):
    """The typed, checked config of ``model:`` (a mapping from YAML or a checkpoint; a typed one passes)."""
    if not isinstance(mapping, Mapping):  # already typed (a family's dataclass)
        return mapping
    return family_of(mapping["name"]).config.from_mapping(mapping)


CONF = Path(__file__).resolve().parent.parent / "conf"


def yaml_mapping(group: str, option: str) -> dict:
    """``conf/<group>/<option>.yaml`` as a mapping, with the files its defaults list places here
    (``/encoder/default@_here_``) under its own keys; defaults for other packages (a model's optim and
    trainer) are not the model's and are left out."""
    text = yaml.safe_load((CONF / group / f"{option}.yaml").read_text()) or {}
    own = {k: v for k, v in text.items() if k != "defaults"}
    out: dict = {}
    for entry in text.get("defaults", ["_self_"]):
        if entry == "_self_":
            out.update(own)
        elif isinstance(entry, str) and entry.endswith("@_here_"):
            out.update(yaml_mapping(*entry.removesuffix("@_here_").strip("/").split("/")))
    return out


def yaml_config(option: str, /, **overrides):
    """The typed config of ``conf/model/<option>.yaml`` (the only source of its values), with ``overrides``
    (``name=`` too: an aggregator on the shared encoder's keys): for a model built outside ``train.py`` (tests,
    tutorials, benchmarks). Checked as ``model_config`` checks."""
    return model_config({**yaml_mapping("model", option), **overrides})


def build_model(model_cfg, vocab_size, num_classes: int, construction=None):
    """The model ``model.name`` names, built by its family from its typed config (``model_cfg``: a mapping
    from YAML or a checkpoint, or a typed config), for graphs of ``construction``. ``vocab_size``: the
    vocabulary's size or the ``data.vocab.Vocab`` itself (``model.embeddings=glove`` needs its tokens). The
    config is checked against the graph once, where the config is parsed (``engine.config.parse_parts``)."""
    config = model_config(model_cfg)
    family = family_of(config.name)
    if not family.takes_vocab and not isinstance(vocab_size, int):
        vocab_size = len(vocab_size)  # a Vocab: this family needs its size only
    return family.build(config, vocab_size, num_classes, construction)


def make_construction(graph_cfg: Mapping, vocab, model_cfg):
    """The graph construction of a run: the model family's own (``graphs_on_own_tokens``: graphs on its word
    pieces, from the same ``graph=``; ``ModelFamily.construction``) or the word-level one that
    ``data.graphs.make_construction`` builds. ``model_cfg``: the typed config (or a mapping, which is typed
    here). The one place that picks; ``data/`` imports nothing of ``models/``."""
    name = model_cfg.get("name") if isinstance(model_cfg, Mapping) else getattr(model_cfg, "name", None)
    if name is not None:
        family = family_of(name)
        if family.graphs_on_own_tokens:
            return family.construction(model_config(model_cfg), graph_cfg)
    return word_construction(graph_cfg, vocab, model_cfg)
