"""The tutorials' shared setup, one import in each part's first cell (``from _setup import ROOT``).

A part finds it because it runs in ``tutorials/``: as a script (``python tutorials/01_....py`` puts the
script's folder on the path) or as a notebook (``make notebooks`` writes ``tutorials/*.ipynb``, and a Jupyter
kernel starts in the notebook's folder). It makes the repository root importable (``data``, ``models``,
``tools``) and sets what every part assumes: DGL on PyTorch, nothing sent to W&B or the Hugging Face hub,
figures drawn to files when no Jupyter kernel shows them, and ``OUT = tutorials/_out/`` (git-ignored).
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tutorials" / "_out"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # MiniLM is read from its installed package, never the hub
if "ipykernel" not in sys.modules:  # as a script: figures to files only; in Jupyter: inline
    os.environ.setdefault("MPLBACKEND", "Agg")
OUT.mkdir(parents=True, exist_ok=True)
