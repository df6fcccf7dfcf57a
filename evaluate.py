"""Evaluate a checkpoint: ``python evaluate.py checkpoint=outputs/<run>/checkpoints/best.pt``.

The checkpoint alone is enough: it holds the resolved config, the vocabulary and the weights, so
the model, the graph construction and (for generated ListOps) the very same test split are
rebuilt from it. ``data_file=path.tsv`` scores a ListOps file instead (either TSV layout, e.g. the
published ``test_d20s.tsv`` or Long Range Arena's ``basic_test.tsv``). ``dataset=NAME`` (a conf/dataset
option, with its ``dataset.data_dir=...``) scores a split of another dataset with the same labels: a model
fine-tuned on GLUE SST-2's phrases, scored on binary SST's test sentences::

    python evaluate.py checkpoint=.../best.pt dataset=sst_binary dataset.data_dir=../shared/data/sst split=test

Prints accuracy overall and by tree depth, length and root operator; writes ``eval.json`` and
``confusion.png`` in its own Hydra run directory (``hydra.run.dir=...`` sets it).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from data.batches import make_loader
from data.graph_dataset import GraphDataset
from engine.checkpoint import load_checkpoint, load_model
from engine.config import exit_on_user_error, parse_parts
from engine.evaluation import format_table, plot_confusion, predict, summarize
from engine.io import write_json
from engine.placement import Placement
from models.impl import check_impl

log = logging.getLogger("evaluate")


def place(cfg: DictConfig, model) -> tuple:
    """The model's device and its graphs' (``Placement.decide``), with ``impl=`` over the checkpoint's impl."""
    if cfg.impl is not None:  # a checkpoint trained with one impl evaluates with the other
        model.impl = check_impl(cfg.impl, "impl")
    devices = Placement.decide(cfg.device, model.impl).devices  # the model's device, the graphs'
    model.to(devices[0])
    return devices


def scored_data(cfg: DictConfig, ckpt: dict, config: dict, vocab, construction) -> tuple[GraphDataset, str]:
    """The graphs ``evaluate`` scores, and what they are (``source``): a split of the checkpoint's dataset,
    ``data_file=`` in its format, or a split of ``dataset=`` (another dataset with the same labels)."""
    data_cfg, other = config["dataset"], cfg.get("dataset")
    if other is not None:  # another dataset's split, scored with this checkpoint's labels
        if cfg.data_file:
            raise ValueError("give either data_file= or dataset=, not both")
        data_cfg = OmegaConf.to_container(other, resolve=True)
        if int(data_cfg["num_classes"]) != int(ckpt["num_classes"]):
            raise ValueError(
                f"dataset={data_cfg['name']} has {data_cfg['num_classes']} classes and the checkpoint "
                f"{ckpt['num_classes']} ({config['dataset']['name']}); pick a dataset with the same labels"
            )
    entry = parse_parts({"dataset": data_cfg}).dataset
    if cfg.data_file:  # a file in the dataset's own format (ListOps: a TSV; text: CSV/TSV/JSON of sentences)
        ds, source = entry.read_file(cfg.data_file, data_cfg, cfg.max_length), str(cfg.data_file)
    else:
        if cfg.split not in entry.splits:
            raise ValueError(f"unknown split {cfg.split!r}; valid: {', '.join(entry.splits)}")
        ds, source = entry.load_splits(data_cfg, True)[cfg.split], f"{data_cfg['name']}/{cfg.split}"
    data = GraphDataset(ds, vocab, construction, desc="eval")
    # Words unseen in training are <unk>, as they were when train.py scored the test split. A file of mostly
    # unknown tokens (any, for ListOps' closed vocabulary) is the wrong kind of data for this checkpoint.
    if (cfg.data_file or other is not None) and data.unknown_share > entry.unknown_limit:
        raise ValueError(
            f"{data.unknown_share:.0%} of the tokens in {source} are not in the checkpoint's vocabulary "
            f"({len(vocab)} tokens, trained on {config['dataset']['name']}); use a checkpoint "
            "trained on this kind of data"
        )
    if data.unknown_share > 0:
        log.info(
            "%.1f%% of the tokens in %s are not in the vocabulary: scored as <unk>", 100 * data.unknown_share, source
        )
    return data, source


def evaluate(cfg: DictConfig, out_dir: str | os.PathLike) -> dict:
    """Score ``cfg.checkpoint`` on the data ``cfg`` names; write eval.json and confusion.png under ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ckpt = load_checkpoint(cfg.checkpoint)
    model, vocab, construction, config = load_model(ckpt, cfg.checkpoint)
    devices = place(cfg, model)
    data, source = scored_data(cfg, ckpt, config, vocab, construction)
    batch_size = int(cfg.batch_size or config["trainer"]["eval_batch_size"])
    preds, labels, loss = predict(model, make_loader(data, batch_size, shuffle=False), *devices)
    summary = summarize(preds, labels, data.meta, int(ckpt["num_classes"]))
    result = {
        "checkpoint": str(cfg.checkpoint),
        "data": source,
        "model": config["model"]["name"],
        "graph": config["graph"]["name"],
        "impl": model.impl,
        "epoch": ckpt["epoch"],
        "loss": loss,
        **summary,
    }
    write_json(out_dir / "eval.json", result)
    plot_confusion(
        summary["confusion"],
        out_dir / "confusion.png",
        f"{config['model']['name']} on {config['graph']['name']} graphs: {source}",
    )
    print(f"{config['model']['name']} / graph={config['graph']['name']} / {source}\n{format_table(summary)}")
    print(f"wrote {out_dir / 'eval.json'} and {out_dir / 'confusion.png'}")
    return result


@hydra.main(version_base="1.3", config_path="conf", config_name="evaluate")
def main(cfg: DictConfig) -> float:
    return exit_on_user_error(lambda: evaluate(cfg, HydraConfig.get().runtime.output_dir))["accuracy"]


if __name__ == "__main__":
    main()
