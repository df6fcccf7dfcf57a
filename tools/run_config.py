"""What a run computes, as a fingerprint: its resolved config less what does not change the computation.

``tools.share`` knows one run recorded under several experiments' names by it, and ``tools.records`` keeps each
run's (``config_digest``, from the run directory's ``.hydra/config.yaml``). Left out: the experiment's own
bookkeeping (``experiment_grids``, ``experiment_then``, ``experiment_table``, ``suite``), the logger, Hydra's
settings, ``trainer.resume`` and ``trainer.progress``; the settings the rest of the config leaves unread
(:data:`UNREAD`); and switches added since some runs were trained, at their default, which leaves the computation
as it was (:data:`NEUTRAL`). This module imports no other of ``tools``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

BOOKKEEPING = ("experiment_grids", "experiment_then", "experiment_table", "suite", "logger", "hydra")
TRAINER_BOOKKEEPING = ("resume", "progress")


def structural(cfg: dict) -> bool:
    from models.encoder import STRUCTURAL_PE

    return (cfg.get("model") or {}).get("positional") in STRUCTURAL_PE


# settings a run reads only when another setting asks for them: (key, when it is read)
UNREAD = (("model.pe_dim", structural), ("model.pe_graph", structural))


# switches added since some records were trained, whose default leaves the computation as it was: absent and
# default are the same run
NEUTRAL = {("trainer", "compile"): False, ("trainer", "device_batches"): False}


def normalized(cfg: dict) -> dict:
    """A run's resolved config less what does not change what it computes (the module docstring)."""
    out = {k: v for k, v in cfg.items() if k not in BOOKKEEPING}
    out["trainer"] = {k: v for k, v in (out.get("trainer") or {}).items() if k not in TRAINER_BOOKKEEPING}
    for key, read_when in UNREAD:
        if not read_when(out):
            section, _, name = key.partition(".")
            out[section] = {k: v for k, v in (out.get(section) or {}).items() if k != name}
    for (section, name), default in NEUTRAL.items():
        if (out.get(section) or {}).get(name, default) == default:
            out[section] = {k: v for k, v in (out.get(section) or {}).items() if k != name}
    return out


def digest(cfg: dict) -> str:
    """A short fingerprint of a normalised config: equal digests, the same computation."""
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


def digest_of_run(run_dir: Path) -> str | None:
    """The digest of the config a run directory trained with (``.hydra/config.yaml``); None without one."""
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "config.yaml"
    if not path.is_file():
        return None
    return digest(normalized(OmegaConf.to_container(OmegaConf.load(path), resolve=True)))
