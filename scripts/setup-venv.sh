#!/usr/bin/env bash
# Creates the virtual environment and installs codeeval (editable) with its test tools.
# torch is installed first and pinned, so pip never resolves an unpinned torch (GBs of CUDA
# packages); pyproject keeps a range so GPU users keep their own build.
set -euo pipefail
venv="${1:-.venv}"
cd "$(dirname "$0")/.."
if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv"
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
    echo "setup: installing torch==2.13.0"
    "$venv/bin/pip" install -q torch==2.13.0
fi
echo "setup: installing codeeval and its dependencies (constraints.txt)"
"$venv/bin/pip" install -q -c constraints.txt -e '.[dev]' 2>&1 | grep -v "^WARNING: Location" || true
"$venv/bin/python" -c "import codeeval.cli, prefect, transformers" || { echo "setup: install failed" >&2; exit 1; }
touch "$venv/bin/codeeval"
echo "setup: done ($("$venv/bin/python" -c 'import prefect, torch; print("prefect", prefect.__version__, "torch", torch.__version__)'))"
