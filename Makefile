# tagnn — `make help` lists the targets.
PY      ?= python3.11
VENV    ?= .venv
PYTHON  := $(VENV)/bin/python
ARGS    ?=

.DEFAULT_GOAL := help
.PHONY: help install test test-all smoke lint format train experiment essay sweep report neural_syntax sst_syntax pretrained_syntax prune_heads evaluate bench notebooks docs docs-check clean clean-cache

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(VENV)/.installed: requirements.txt requirements-nodeps.txt
	@command -v $(PY) >/dev/null || { echo "error: $(PY) not found; install Python 3.11 or run 'make install PY=/path/to/python3.11'"; exit 1; }
	$(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade "pip<25"
	$(PYTHON) -m pip install --quiet -r requirements.txt
	$(PYTHON) -m pip install --quiet --no-deps -r requirements-nodeps.txt
	$(PYTHON) -c "import dgl, torch; print('installed: dgl', dgl.__version__, '| torch', torch.__version__)"
	@touch $@

install: $(VENV)/.installed ## create .venv with the pinned stack (CPU; ~5 min, ~6 GB)

TEST_WORKERS ?= auto
test: install ## the docs against their evidence (tools.check_docs), then the fast test suite on every core, one thread per worker (CPU, < 10 min; TEST_WORKERS=0: one process)
	@$(PYTHON) -c "import dgl, torch; print('smoke: dgl', dgl.__version__, 'torch', torch.__version__)"
	$(PYTHON) -m tools.check_docs
	OMP_NUM_THREADS=1 $(PYTHON) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --maxprocesses 4 $(ARGS)

test-all: install ## run every test, the slow ones too
	$(PYTHON) -m pytest -q $(ARGS)

smoke: install ## a newcomer's first hour on a clean copy: the quickstart, model=minilm as typed, evaluate.py, tools.embed (tests/test_newcomer.py)
	$(PYTHON) -m pytest -q -m slow tests/test_newcomer.py $(ARGS)

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

E ?= graph_choice
experiment: install ## one experiment of conf/experiment/ (all its grids) -> docs/results/E.md, docs/figures/E_*.png: make experiment E=sst; in parts: ARGS="--missing --max-runs 4"
	@test -n "$(E)" || { echo "error: name the experiment: make experiment E=<file in conf/experiment/>"; exit 2; }
	$(PYTHON) -m tools.experiment $(E) $(ARGS)

SMALL ?=
essay: install ## every essay experiment, then the answers -> docs/results/essay.md (~26 h on 2 cores, an estimate: docs/essay.md "Compute"); SMALL=1: < 1 h -> docs/results/small/
	$(if $(SMALL),OMP_NUM_THREADS=1) $(PYTHON) -m studies.essay $(if $(SMALL),scale=small cluster=joblib) $(ARGS)

sweep: ## every model x graph on ListOps, 3 seeds (= make experiment E=graph_choice; ~7 CPU-hours, 6.65 h of training measured in docs/results/essay.md, Compute; ~3.5 h on 2 cores; SMALL: make essay SMALL=1)
	$(MAKE) --no-print-directory experiment E=graph_choice

report: install ## tables, depth plot, training curves of any sweep: make report DIR=multirun/<sweep> -> DIR/results.md ...
	@test -n "$(DIR)" || { echo "error: give the sweep directory: make report DIR=multirun/<sweep>"; exit 2; }
	$(PYTHON) -m tools.results_table $(DIR) --out $(DIR)/results.md --plot $(DIR)/by_depth.png --curves $(DIR)/curves.png

neural_syntax: install ## train Transformers on complete graphs (3 seeds), measure their attention against the gold trees
	$(PYTHON) -m tools.experiment neural_syntax $(ARGS)

prune_heads: install ## prune the heads of experiment=heads' 8-head model (make experiment E=heads first)
	$(PYTHON) -m studies.prune_heads multirun/heads/model.num_heads=8,seed=0 --out docs/results/prune_heads $(ARGS)

bench: install ## the hardware lottery (sparse vs dense), the recursive models' step cost, cost as n grows, the pretrained MiniLM (DGL vs dense vs HF), sum/mean/max on complete graphs, tagnn's loop against plain PyTorch (anchor) -> bench/results/<machine>/ (cpu-2core here; ~27 min on 2 cores)
	$(PYTHON) -m bench.hardware_lottery $(ARGS)
	$(PYTHON) -m bench.padding > bench/results/padding.md
	$(PYTHON) -m bench.recursive
	$(PYTHON) -m bench.scaling
	$(PYTHON) -m bench.pretrained
	$(PYTHON) -m bench.pooling --threads 1
	$(PYTHON) -m bench.anchor

notebooks: install ## tutorials/*.py -> tutorials/*.ipynb, executed in .venv's kernel (outputs and figures in; not committed)
	$(PYTHON) -m tools.site notebooks

docs: notebooks ## the tutorial website -> build/site/index.html (executed tutorials, docs/*.md, MathML equations; offline, ~1 min)
	$(PYTHON) -m tools.site build

docs-check: docs ## open every page of the site in headless Chromium (apt-get install chromium); screenshots -> build/site_check/
	TAGNN_REQUIRE_BROWSER=1 TAGNN_SITE_BUILT=1 $(PYTHON) -m pytest -q -m slow tests/tools/test_site.py $(ARGS)

clean-cache: ## remove parsed text datasets and cached graphs (.cache/tagnn)
	rm -rf .cache/tagnn

clean: ## remove outputs, multirun, wandb and caches (keeps .venv)
	rm -rf outputs multirun wandb build .pytest_cache .ruff_cache .cache/tagnn
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +

sst_syntax: install ## does a complete-graph Transformer trained on SST find the gold or the dependency tree? (after make experiment E=sst)
	@for s in 0 1 2; do for t in gold dep; do \
		$(PYTHON) -m studies.attention_syntax "multirun/sst/graph=complete,model=transformer,seed=$$s" --tree $$t \
			--out docs/results/sst_syntax/seed$${s}_$$t || exit 1; done; done
	$(PYTHON) -m tools.check_docs --render docs/results/sst_syntax.md

SYNTAX_RUN ?= outputs/pretrained_syntax/sst_transformer_complete
FINETUNED_RUN ?= multirun/pretrained_graphs/dataset=sst_binary,graph=complete,seed=0# make experiment E=pretrained_graphs's first run
pretrained_syntax: install ## which heads of pretrained MiniLM (and a from-scratch SST Transformer) find the parse -> docs/results/pretrained_syntax.{json,md} (~15 min)
	test -f $(SYNTAX_RUN)/checkpoints/best.pt || OMP_NUM_THREADS=1 $(PYTHON) train.py experiment=sst graph=complete \
		model=transformer seed=0 logger=none hydra.run.dir=$(SYNTAX_RUN)
	$(PYTHON) -m studies.pretrained_syntax --checkpoint $(SYNTAX_RUN) --label from-scratch --name pretrained_syntax_scratch \
		--out docs/results --figures docs/figures
	test ! -f "$(FINETUNED_RUN)/results.json" || $(PYTHON) -m studies.pretrained_syntax --checkpoint "$(FINETUNED_RUN)" \
		--label "fine-tuned MiniLM" --name pretrained_syntax_finetuned --out docs/results --figures docs/figures
	$(PYTHON) -m studies.pretrained_syntax --model minilm --out docs/results --figures docs/figures \
		--beside docs/results/pretrained_syntax_scratch.json \
		$(if $(wildcard docs/results/pretrained_syntax_finetuned.json),--beside docs/results/pretrained_syntax_finetuned.json) \
		--md docs/results/pretrained_syntax.md
