"""ListOps: nested list operations whose answer is a digit (Nangia & Bowman, 2018).

An example is a bracketed expression such as

    [MAX 2 9 [MIN 4 7 ] 0 ]      ->  9

with four operators, each closed by ``]``: ``[MAX``, ``[MIN``, ``[MED`` (median, truncated to an
int) and ``[SM`` (sum modulo 10). The answer depends on the whole tree, so a model must compose
its parts: a good test of which *graph* over the tokens helps a GNN (the gold tree is known).

This module follows the published recipe (the ``listops-release`` generator): every node, the
root included, is an operator with probability 0.25, else a digit; an operator takes 2-5
arguments; depth is capped at 20 (a node at depth 20 is always a digit, so operators nest at most
19 deep, as in the published generator). Expressions longer than ``max_length`` tokens are
dropped, duplicates are dropped, and everything is deterministic given the seed. Because the
root may be a digit, a bare digit such as ``7`` is an expression (depth 0): at most ten exist, and
the published test file holds one (``9<TAB>9``). ``root_operator=True`` forbids them.

Each example is a dict ``{"tokens": [...], "label": int, "heads": [...]}`` where ``heads[i]`` is
the index of token i's parent in the tree (-1 for the root): an operator heads its arguments and
its own ``]``.

Files: two TSV layouts are read and written (``read_tsv``, ``write_tsv``):
  * ``listops``: ``label<TAB>expression`` (the published files; parentheses ``( )`` mark the
    binarisation and are dropped when tokenising),
  * ``lra``: a ``Source<TAB>Target`` header, then ``expression<TAB>label`` (Long Range Arena).
"""

from __future__ import annotations

import os
import random
import statistics
from collections.abc import Iterator, Mapping
from pathlib import Path

from data.cache import tmp_sibling
from data.datasets import SPLITS, DatasetEntry, register_dataset

OPERATORS = ("[MAX", "[MIN", "[MED", "[SM")
END = "]"
DIGITS = tuple(str(d) for d in range(10))
TOKENS = OPERATORS + (END,) + DIGITS
NUM_CLASSES = 10
LRA_HEADER = ("Source", "Target")
SAMPLERS = ("reject", "budget")


class ListOpsError(ValueError):
    """A malformed ListOps expression or file; the message says what to fix."""


# --------------------------------------------------------------------------------------------
# Values: what an expression means
# --------------------------------------------------------------------------------------------
def apply_operator(op: str, args: list[int]) -> int:
    """The value of ``op`` applied to digit arguments."""
    if op == "[MAX":
        return max(args)
    if op == "[MIN":
        return min(args)
    if op == "[MED":
        return int(statistics.median(args))  # median of an even count is a .5: truncated
    if op == "[SM":
        return sum(args) % 10
    raise ListOpsError(f"unknown operator {op!r}; valid operators: {', '.join(OPERATORS)}")


def parse(tokens: list[str]) -> tuple[int, list[int], int]:
    """Check ``tokens`` is one well-formed expression; return ``(value, heads, depth)``.

    ``heads[i]`` is the parent of token i (-1 for the root operator); ``depth`` is the number of
    operators on the longest root-to-leaf path (``[SM 1 2 ]`` has depth 1, a bare digit depth 0).
    """
    if not tokens:
        raise ListOpsError("empty expression: an expression is a digit or an operator, e.g. '7' or '[SM 1 2 ]'")
    if len(tokens) == 1 and tokens[0] in DIGITS:  # a bare digit: its own value, the root of a one-node tree
        return int(tokens[0]), [-1], 0
    if tokens[0] not in OPERATORS:
        raise ListOpsError(
            f"expression must be a digit or start with an operator ({', '.join(OPERATORS)}), got {tokens[0]!r}"
        )
    heads = [-1] * len(tokens)
    stack: list[tuple[int, str, list[int]]] = []  # (token index, operator, argument values)
    value, depth = None, 0
    for i, tok in enumerate(tokens):
        if value is not None:
            raise ListOpsError(f"extra tokens after the root operator closed, at token {i} ({tok!r})")
        if stack:
            heads[i] = stack[-1][0]
        if tok in OPERATORS:
            stack.append((i, tok, []))
            depth = max(depth, len(stack))
        elif tok in DIGITS:  # the stack is never empty here: the root opened it, and closing it ends the loop
            stack[-1][2].append(int(tok))
        elif tok == END:
            _, op, args = stack.pop()
            if not args:
                raise ListOpsError(f"operator {op} closed at token {i} with no arguments")
            result = apply_operator(op, args)
            if stack:
                stack[-1][2].append(result)
            else:
                value = result
        else:
            raise ListOpsError(f"unknown token {tok!r} at position {i}; valid tokens: {' '.join(TOKENS)}")
    if value is None:
        raise ListOpsError(f"{len(stack)} operator(s) never closed with ']'")
    return value, heads, depth


def tokenize(expression: str) -> list[str]:
    """Split on spaces, dropping the binarisation parentheses of the published files."""
    return [t for t in expression.split() if t not in ("(", ")")]


def make_example(tokens: list[str], label: int | None = None) -> dict:
    """An example dict from tokens; checks the label against the expression's value if given."""
    value, heads, depth = parse(tokens)
    if label is not None and label != value:
        raise ListOpsError(f"label {label} but the expression evaluates to {value}")
    return {"tokens": list(tokens), "label": value, "heads": heads, "depth": depth}


# --------------------------------------------------------------------------------------------
# Generation (the published recipe, written afresh)
# --------------------------------------------------------------------------------------------
def _random_tree(rng: random.Random, depth: int, max_depth: int, p_operator: float, max_args: int, root: bool):
    """A nested ``(operator, [children])`` tuple or an int digit; ``root=True`` forces an operator."""
    is_operator = root or (depth < max_depth and rng.random() < p_operator)
    if not is_operator:
        return rng.randrange(10)
    children = [
        _random_tree(rng, depth + 1, max_depth, p_operator, max_args, False) for _ in range(rng.randint(2, max_args))
    ]
    return (rng.choice(OPERATORS), children)


class _TooLong(Exception):
    """A draw passed the length budget: it would be rejected, so it is abandoned half-built."""


def _budget_tokens(
    rng: random.Random, max_depth: int, p_operator: float, max_args: int, root: bool, budget: int
) -> list[str]:
    """The tokens of one draw of the recipe, making the same random calls in the same order as
    ``_tree_tokens(_random_tree(...))``, or ``_TooLong`` as soon as the draw has more than ``budget`` tokens."""
    out: list[str] = []

    def grow(depth: int, is_root: bool) -> None:
        if not (is_root or (depth < max_depth and rng.random() < p_operator)):
            out.append(str(rng.randrange(10)))
        else:
            at = len(out)
            out.append("")  # the operator, drawn after its children (as _random_tree draws it)
            for _ in range(rng.randint(2, max_args)):
                grow(depth + 1, False)
            out[at] = rng.choice(OPERATORS)
            out.append(END)
        if len(out) > budget:
            raise _TooLong

    grow(1, root)
    return out


def _tree_tokens(tree) -> list[str]:
    if isinstance(tree, int):
        return [str(tree)]
    op, children = tree
    out = [op]
    for child in children:
        out += _tree_tokens(child)
    return out + [END]


def generate(
    num: int,
    seed: int = 0,
    max_length: int = 100,
    max_depth: int = 20,
    p_operator: float = 0.25,
    max_args: int = 5,
    min_length: int = 1,
    root_operator: bool = False,
    sampler: str = "reject",
) -> Iterator[dict]:
    """Yield ``num`` unique random examples of ``min_length``..``max_length`` tokens, deterministically.

    They come in the order they were drawn, so early ones are shorter on average (short
    expressions are used up first by the de-duplication): shuffle before slicing splits
    (``data.splits.load_splits`` does).

    ``sampler``: how a draw outside the length range is thrown away; both give the same distribution
    (the recipe's trees, conditioned on their length), from different random streams.
      * ``reject`` (the published generator): draw whole trees, keep those of the right length.
      * ``budget``: abandon a draw as soon as it passes ``max_length`` tokens (it would be rejected,
        and its length so far depends only on its own random numbers), and, when ``min_length > 1``,
        make the root an operator (a bare digit is too short anyway; when the recipe can make one). At the Long
        Range Arena's 500-2,000 tokens, 92% of whole draws are rejected (66% with an operator root)
        and the over-long ones cost the most to build: 2,000 expressions take 3.0 s instead of 4.5 s
        here, most of what is left being ``parse``.
    """
    if sampler not in SAMPLERS:
        raise ListOpsError(f"unknown dataset.sampler {sampler!r}; valid samplers: {', '.join(SAMPLERS)}")
    shortest = 4 if root_operator else 1  # '[SM 1 2 ]', or a bare digit
    if num < 0 or max_length < shortest:
        raise ListOpsError(f"need num >= 0 and max_length >= {shortest}, got {num}, {max_length}")
    if min_length > max_length:
        raise ListOpsError(
            f"dataset.min_length={min_length} is above dataset.max_length={max_length}: no expression fits; "
            "lower min_length or raise max_length"
        )
    # budget: a draw of two or more tokens has an operator root, so one can be asked for up front, if the
    # recipe can make one at all (the root is at depth 1)
    force_root = sampler == "budget" and min_length > 1 and max_depth > 1 and p_operator > 0
    rng = random.Random(seed)
    seen: set[tuple[str, ...]] = set()
    attempts = 0
    while len(seen) < num:
        attempts += 1
        if attempts > 100 * num + 10_000:
            raise ListOpsError(
                f"could only make {len(seen)} unique expressions of {min_length}-{max_length} tokens; "
                "ask for fewer examples or widen the length range"
            )
        if sampler == "budget":
            try:
                tokens = _budget_tokens(rng, max_depth, p_operator, max_args, root_operator or force_root, max_length)
            except _TooLong:
                continue
        else:
            tokens = _tree_tokens(_random_tree(rng, 1, max_depth, p_operator, max_args, root=root_operator))
        key = tuple(tokens)
        if not (min_length <= len(tokens) <= max_length) or key in seen:
            continue
        seen.add(key)
        yield make_example(tokens)


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------
def binarised_string(tokens: list[str]) -> str:
    """The published files' layout: each operator's arguments added one at a time in parentheses,
    e.g. ``[MAX 2 9 ]`` -> ``( ( ( [MAX 2 ) 9 ) ] )``."""
    _, heads, _ = parse(tokens)  # a bare digit is written as itself
    children: dict[int, list[int]] = {i: [] for i in range(len(tokens))}
    for i, h in enumerate(heads):
        if h >= 0:
            children[h].append(i)

    def render(i: int) -> str:
        if tokens[i] not in OPERATORS:
            return tokens[i]
        kids = children[i]  # the arguments, then the closing ']'
        s = f"( {tokens[i]} {render(kids[0])} )"
        for k in kids[1:]:
            s = f"( {s} {render(k)} )"
        return s

    return render(0)


def write_tsv(examples, path: str | os.PathLike, layout: str = "listops") -> None:
    """Write examples in the ``listops`` (label first) or ``lra`` (header, expression first) layout.

    Written to a temporary file and renamed, so a failed write never leaves half a file.
    """
    if layout not in ("listops", "lra"):
        raise ListOpsError(f"unknown layout {layout!r}; valid layouts: listops, lra")
    path = Path(path)
    tmp = tmp_sibling(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            if layout == "lra":
                f.write("\t".join(LRA_HEADER) + "\n")
            for ex in examples:
                expr = binarised_string(ex["tokens"])
                f.write(f"{ex['label']}\t{expr}\n" if layout == "listops" else f"{expr}\t{ex['label']}\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_tsv(path: str | os.PathLike, max_length: int | None = None) -> list[dict]:
    """Read a ListOps TSV in either layout (detected from a ``Source<TAB>Target`` header).

    Every line is checked; a bad one raises ``ListOpsError`` naming the file and line number.
    """
    path = Path(path)
    if not path.is_file():
        raise ListOpsError(f"no such ListOps file: {path} (generate one with data.listops.write_tsv or check the path)")
    examples = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (UnicodeDecodeError, OSError) as e:
        reason = e.reason if isinstance(e, UnicodeDecodeError) else e.strerror
        raise ListOpsError(f"cannot read {path} as UTF-8 text ({reason}); is it a ListOps TSV file?") from None
    lra = bool(lines) and tuple(c.strip() for c in lines[0].split("\t")) == LRA_HEADER
    for lineno, line in enumerate(lines, start=1):
        if (lra and lineno == 1) or not line.strip():
            continue
        fields = line.split("\t")
        where = f"{path}:{lineno}"
        if len(fields) != 2:
            raise ListOpsError(
                f"{where}: expected 2 tab-separated fields, found {len(fields)} "
                f"({'expression<TAB>label' if lra else 'label<TAB>expression'})"
            )
        label_s, expr = (fields[1], fields[0]) if lra else fields
        try:
            label = int(label_s)
        except ValueError:
            raise ListOpsError(f"{where}: label {label_s!r} is not an integer 0-9") from None
        tokens = tokenize(expr)
        if max_length is not None and len(tokens) > max_length:
            raise ListOpsError(
                f"{where}: expression has {len(tokens)} tokens, over dataset.max_length={max_length}; "
                "raise dataset.max_length or drop the line"
            )
        try:
            examples.append(make_example(tokens, label))
        except ListOpsError as e:
            raise ListOpsError(f"{where}: {e}") from None
    if not examples:
        raise ListOpsError(f"{path} holds no examples")
    return examples


# --------------------------------------------------------------------------------------------
# A published-layout file from the command line
# --------------------------------------------------------------------------------------------
def sample_unseen(num: int, seed: int, seen: set | frozenset = frozenset(), **recipe) -> list[dict]:
    """``num`` fresh expressions of the recipe (``generate``'s keywords), none of them in ``seen``
    (token tuples), in the order they were drawn."""
    out = []
    for ex in generate(10 * num + 10_000, seed=seed, **recipe):
        if len(out) == num:
            break
        if tuple(ex["tokens"]) not in seen:
            out.append(ex)
    return out


PRESETS = {
    "published": {"max_length": 100, "min_length": 1, "max_depth": 20, "max_args": 5, "layout": "listops"},
    # Long Range Arena (Tay et al., 2021): 500 < length < 2,000, max depth 10, up to 10 arguments
    "long": {
        "max_length": 1999,
        "min_length": 501,
        "max_depth": 10,
        "max_args": 10,
        "sampler": "budget",
        "layout": "lra",
    },
}


def main(argv=None) -> int:
    """``python -m data.listops --num 10000 --seed 123 --out test.tsv``: a fresh sample of the recipe,
    written as the published files are (binarisation parentheses), or in the LRA layout."""
    import argparse

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--num", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=123, help="a seed the training data did not use")
    p.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        default="published",
        help="published: Nangia & Bowman's recipe (<= 100 tokens, depth 20, 2-5 arguments); long: the Long Range "
        "Arena's (501-1,999 tokens, depth 10, 2-10 arguments, LRA layout); the options below override it",
    )
    p.add_argument("--max-length", type=int)
    p.add_argument("--min-length", type=int)
    p.add_argument("--max-depth", type=int)
    p.add_argument("--max-args", type=int)
    p.add_argument("--layout", choices=("listops", "lra"))
    p.add_argument(
        "--exclude-num",
        type=int,
        default=0,
        help="leave out every expression of the first N of --exclude-seed's pool (101000 with seed 0 is the pool "
        "of a dataset=listops_full run): a file none of whose lines the model trained on",
    )
    p.add_argument("--exclude-seed", type=int, default=0)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    recipe = dict(PRESETS[args.preset])
    for key in ("max_length", "min_length", "max_depth", "max_args", "layout"):
        if getattr(args, key) is not None:
            recipe[key] = getattr(args, key)
    layout = recipe.pop("layout")
    # the pool to leave out is one of the published recipe (a dataset=listops run's), up to the file's length
    pool_length = min(recipe["max_length"], PRESETS["published"]["max_length"])
    no_overlap = recipe["min_length"] > pool_length  # the pool's expressions are all shorter than the file's
    num = 0 if no_overlap else args.exclude_num
    seen = {tuple(e["tokens"]) for e in generate(num, seed=args.exclude_seed, max_length=pool_length)}
    examples = sample_unseen(args.num, args.seed, seen, **recipe)
    random.Random(args.seed).shuffle(examples)  # the generator's order runs from short to long
    write_tsv(examples, args.out, layout=layout)
    print(f"wrote {len(examples)} expressions ({layout} layout) to {args.out}")
    return 0


# --------------------------------------------------------------------------------------------
# The dataset: its splits, its file reader and its registry entry
# --------------------------------------------------------------------------------------------
def describe_example(ex: dict) -> dict:
    """Per-example fields for the evaluation breakdowns: length, and the root operator ("digit" for a
    bare digit)."""
    root = ex["tokens"][0]
    return {"length": len(ex["tokens"]), "group": root if root in OPERATORS else "digit"}


# what determines generated splits: the generator's settings, the data seed, the shuffle, the split sizes
GENERATOR_KEYS = ("seed", "max_length", "max_depth", "p_operator", "max_args", "min_length", "root_operator", "sampler")
SPLITS_FORMAT = 1  # the cache file's layout (and the generator's behaviour): bump to retire every cached file


def load_listops_splits(cfg: Mapping, progress: bool = True) -> dict:
    """The generated (or read) ListOps splits, ``{"train"|"val"|"test": Dataset}``.

    Generated splits are built once and cached (``data/cache.py``), keyed by the generator's settings, the
    data seed, the shuffle and the split sizes: a second run reads them in well under a second."""
    from data import cache

    cfg = upgrade_listops_config(cfg)  # a checkpoint's config of any age: its keys as they were read then
    sizes = [int(cfg[f"num_{s}"]) for s in SPLITS]
    root = cache.cache_root(cfg)
    if root is None or any(cfg.get(f"{s}_file") for s in SPLITS):  # files are read, not generated: no cache
        return _build_listops_splits(cfg, sizes, progress)
    settings = {k: cfg[k] for k in GENERATOR_KEYS} | {"shuffle": bool(cfg["shuffle"]), "sizes": sizes}
    path = root / "listops" / f"splits-{cache.key_digest('listops', SPLITS_FORMAT, settings)}.bin"
    payload = cache.read(path, "ListOps splits")
    if payload is not None:
        return _splits_from_bytes(payload)
    out = _build_listops_splits(cfg, sizes, progress)
    cache.write(path, _splits_to_bytes(out))
    return out


def _splits_to_bytes(splits: dict) -> bytes:
    """The splits as one JSON line (name, fingerprint, length of each) and their Arrow tables, back to back."""
    import json

    import pyarrow as pa

    blobs, header = [], []
    for name, ds in splits.items():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, ds.data.table.schema) as writer:
            writer.write_table(ds.data.table)
        blobs.append(sink.getvalue().to_pybytes())
        header.append({"split": name, "fingerprint": ds._fingerprint, "bytes": len(blobs[-1])})
    return json.dumps(header).encode() + b"\n" + b"".join(blobs)


def _splits_from_bytes(payload: bytes) -> dict:
    """:func:`_splits_to_bytes` read back: the same rows, features and fingerprints (so the graph cache,
    keyed by the fingerprint, finds its graphs)."""
    import json

    import datasets
    import pyarrow as pa
    from datasets.table import InMemoryTable

    head, _, rest = payload.partition(b"\n")
    out, start = {}, 0
    for entry in json.loads(head):
        table = pa.ipc.open_stream(pa.py_buffer(rest[start : start + entry["bytes"]])).read_all()
        out[entry["split"]] = datasets.Dataset(InMemoryTable(table), fingerprint=entry["fingerprint"])
        start += entry["bytes"]
    return out


def _build_listops_splits(cfg: Mapping, sizes: list[int], progress: bool) -> dict:
    import datasets
    from tqdm.auto import tqdm

    generated = None
    out = {}
    for split, size in zip(SPLITS, sizes):
        path = cfg.get(f"{split}_file")
        if path:
            rows = read_tsv(path, max_length=cfg.get("max_length"))
        else:
            if generated is None:  # one pool for all splits, so no expression is in two splits
                stream = generate(
                    sum(sizes),
                    seed=int(cfg["seed"]),
                    max_length=int(cfg["max_length"]),
                    max_depth=int(cfg["max_depth"]),
                    p_operator=float(cfg["p_operator"]),
                    max_args=int(cfg["max_args"]),
                    min_length=int(cfg["min_length"]),
                    root_operator=bool(cfg["root_operator"]),
                    sampler=cfg["sampler"],
                )
                generated = list(
                    tqdm(stream, total=sum(sizes), desc="generating ListOps", leave=False, disable=not progress)
                )
                # The generator de-duplicates, so it runs out of short expressions early: its first
                # examples are shorter than its last. Shuffled with the data seed, the splits are
                # i.i.d. samples of one pool (tests/data/test_listops.py checks their lengths and depths agree).
                if cfg["shuffle"]:
                    random.Random(int(cfg["seed"])).shuffle(generated)
            start = sum(sizes[: SPLITS.index(split)])
            rows = generated[start : start + size]
        if not rows:
            raise ValueError(f"the {split} split is empty: set dataset.num_{split} > 0 or give dataset.{split}_file")
        out[split] = datasets.Dataset.from_list(rows).map(describe_example)
    return out


def upgrade_listops_config(cfg: Mapping) -> dict:
    """A ListOps config with the keys added after it was written filled in as the code read them then:
    a checkpoint from before bare digits and shuffling gets back the splits it was trained on (operator
    roots, unshuffled), and compares equal to the config that remakes its data."""
    out = dict(cfg)
    out.setdefault("min_length", 1)
    out.setdefault("shuffle", "root_operator" in out)  # before this key: shuffled iff root_operator existed
    out.setdefault("root_operator", True)
    out.setdefault("sampler", "reject")
    return out


def _read_file(path, cfg, max_length=None):
    import datasets

    return datasets.Dataset.from_list(read_tsv(path, max_length=max_length)).map(describe_example)


register_dataset(
    DatasetEntry(
        "listops",
        load_listops_splits,
        _read_file,
        "ListOps (Nangia & Bowman, 2018), generated: nested MAX/MIN/MED/SM over digits, 10 classes",
        num_classes=NUM_CLASSES,
        upgrade=upgrade_listops_config,
    )
)


if __name__ == "__main__":
    raise SystemExit(main())
