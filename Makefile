# tagnn — `make help` lists the targets.
PY      ?= python3.11
VENV    ?= .venv
PYTHON  := $(VENV)/bin/python
ARGS    ?=

.DEFAULT_GOAL := help
.PHONY: help install test test-all lint format train sweep report evaluate bench clean clean-cache

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt
	@command -v $(PY) >/dev/null || { echo "error: $(PY) not found; install Python 3.11 or run 'make install PY=/path/to/python3.11'"; exit 1; }
	$(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade "pip<25"
	$(PYTHON) -m pip install --quiet -r requirements.txt
	$(PYTHON) -c "import dgl, torch; print('installed: dgl', dgl.__version__, '| torch', torch.__version__)"
	@touch $@

install: $(VENV)/.installed ## create .venv with the pinned stack (CPU; ~5 min, ~6 GB)

test: install ## run the fast test suite (CPU, < 10 min)
	@$(PYTHON) -c "import dgl, torch; print('smoke: dgl', dgl.__version__, 'torch', torch.__version__)"
	$(PYTHON) -m pytest -q -m "not slow" $(ARGS)

test-all: install ## run every test, the slow ones too
	$(PYTHON) -m pytest -q $(ARGS)

lint: install ## ruff check + format check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install ## ruff format + autofix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

train: install ## train once: make train ARGS="model=gat graph=complete"
	$(PYTHON) train.py $(ARGS)

evaluate: install ## evaluate a checkpoint: make evaluate ARGS="checkpoint=outputs/.../checkpoints/best.pt"
	$(PYTHON) evaluate.py $(ARGS)

SWEEP_DIR ?= multirun/all_graphs
sweep: install ## every model x graph on ListOps (Hydra multirun, ~16 min on 2 cores), then the results table
	$(PYTHON) train.py -m experiment=all_graphs model=gcn,gat,transformer graph=complete,tree,window,knn,none \
		trainer.progress=false hydra.sweep.dir=$(SWEEP_DIR) $(ARGS)
	$(PYTHON) -m tools.results_table $(SWEEP_DIR) --out $(SWEEP_DIR)/results.md --plot docs/figures/all_graphs_by_depth.png

report: install ## tables + depth plot from a sweep: make report DIR=multirun/<sweep>
	$(PYTHON) -m tools.results_table $(or $(DIR),$(SWEEP_DIR)) --out $(or $(DIR),$(SWEEP_DIR))/results.md \
		--plot $(or $(DIR),$(SWEEP_DIR))/by_depth.png

bench: install ## the hardware lottery: sparse vs dense per graph and n -> bench/results/ (~7 min on 2 cores)
	$(PYTHON) -m bench.hardware_lottery $(ARGS)
	$(PYTHON) -m bench.padding

clean-cache: ## remove parsed text datasets and cached graphs (.cache/tagnn)
	rm -rf .cache/tagnn

clean: ## remove outputs, multirun, wandb and caches (keeps .venv)
	rm -rf outputs multirun wandb .pytest_cache .ruff_cache .cache/tagnn
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +
