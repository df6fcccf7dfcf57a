"""The model families: one :class:`ModelFamily` entry per kind of model, registered by the module that
defines it (``models/encoder.py``: the synchronous encoder, one model name per aggregator;
``models/recursive.py``: the recursive tree models). ``models/__init__.py`` imports every module of the
package, so a new family is its module (with its ``register_family`` call) and its conf/model YAML.

A family says which ``model.name`` values it serves, the typed config its YAML fills (a dataclass with a
``from_mapping`` that checks every value once), how to build the model, and what the rest of the code
must know about it: how a training step uses memory, and whether it brings its own tokenizer and
vocabulary (a pretrained model does) and builds its graphs on its own tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class ModelFamily:
    """A kind of model. Its config class has ``from_mapping(mapping)`` (checks every value, names a missing key),
    ``check(graph_kind)`` (rules involving the graph construction) and the attributes the rest of the code
    reads: ``name``, ``impl`` (sparse | dense | auto: where its graphs may live), and for ``memory="layers"``
    ``hidden_dim``, ``num_layers``, ``num_heads`` (and ``dense_min_density`` when ``impl`` is auto)."""

    name: str
    models: tuple[str, ...]  # the model.name values it serves
    config: type  # its typed config: a dataclass with from_mapping(mapping, model) and check(graph_kind)
    build: Callable  # (config, vocab_size, num_classes, construction) -> nn.Module
    description: str = ""
    memory: str = (
        "layers"  # how engine/memory.py estimates a step: layers (L rounds over edges) | one_pass (a tree walk)
    )
    own_tokenizer: bool = False  # brings its own tokenizer and vocabulary (a pretrained model)
    graphs_on_own_tokens: bool = False  # its graphs are built over its own tokens (word pieces), not words
    # for graphs_on_own_tokens: (typed config, graph config) -> the construction that turns a sentence's words
    # into a graph on its tokens (data.wordpiece.PieceConstruction: tokenise, then lift the word-level graph)
    construction: Callable | None = None
    # its builder gets the Vocab itself (tokens, training counts) in place of vocab_size, when the caller has
    # one: model.embeddings=glove looks its words up (models/embeddings.py)
    takes_vocab: bool = False


MODEL_FAMILIES: dict[str, ModelFamily] = {}


def register_family(family: ModelFamily) -> ModelFamily:
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


def build_model(model_cfg, vocab_size, num_classes: int, construction=None):
    """The model ``model.name`` names, built by its family from its typed config (``model_cfg``: a mapping
    from YAML or a checkpoint, or a typed config), for graphs of ``construction``. ``vocab_size``: the
    vocabulary's size or the ``data.vocab.Vocab`` itself (``model.embeddings=glove`` needs its tokens)."""
    config = model_config(model_cfg)
    if construction is not None:
        config.check(construction.kind)
    family = family_of(config.name)
    if not family.takes_vocab and not isinstance(vocab_size, int):
        vocab_size = len(vocab_size)  # a Vocab: this family needs its size only
    return family.build(config, vocab_size, num_classes, construction)


def make_construction(graph_cfg: Mapping, vocab, model_cfg: Mapping):
    """The graph construction of a run: the model family's own (``graphs_on_own_tokens``: graphs on its word
    pieces, from the same ``graph=``) or the word-level one of ``data.pipeline.make_construction``."""
    from data.pipeline import make_construction as word_construction

    name = model_cfg.get("name") if isinstance(model_cfg, Mapping) else getattr(model_cfg, "name", None)
    if name is not None:
        family = family_of(name)
        if family.graphs_on_own_tokens:
            from data.graphs import graph_kind

            graph_kind(graph_cfg["name"])  # an unknown graph: the registry's one line
            return family.construction(model_config(model_cfg), graph_cfg)
    return word_construction(graph_cfg, vocab, model_cfg)
