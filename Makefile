# Every target creates .venv on first use. torch is installed first and pinned exactly
# (torch==2.13.0, the CPU wheel) so that no other package can pull a CUDA build.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The main job: build the small calculator agent (~10 min on 2 cores, cached afterwards),
# train it with GSPO on a fresh calc workspace (~50 steps), and ask the trained model.
DEMO := demo-calc
demo: $(STAMP)
	$(BIN)/rltune models build-demo --size small
	rm -rf $(DEMO) && $(BIN)/rltune init workspace $(DEMO) --template calc --train-rows 400
	cd $(DEMO) && ../$(BIN)/rltune train -c job.yaml --output-dir run
	$(BIN)/rltune models chat "$$($(BIN)/python -c 'from rltune.trainer.checkpoint import latest_checkpoint as l; print(l("$(DEMO)/run/checkpoints"))')" "What is 7 * 8?"

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache $(DEMO)
