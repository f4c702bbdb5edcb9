#!/usr/bin/env bash
# The main job: the reference oracle on HumanEval through the whole flow (load, generate,
# execute in the sandbox, score, publish), then prints the scores.
set -euo pipefail
cd "$(dirname "$0")/.."
data_dir="${DATA_DIR:-../shared/data}"
data_args=()
[ -d "$data_dir" ] && data_args=(--data-dir "$data_dir")
exec .venv/bin/codeeval run --model reference --tasks humaneval --allow_code_execution \
    --executor "${EXECUTOR:-docker}" "${data_args[@]}"
