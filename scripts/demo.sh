#!/usr/bin/env bash
# The main job: build (once, cached) the small demo model, evaluate it and the `reference`
# oracle on HumanEval and MBPP through the whole flow (generation, execution in the Docker
# sandbox, scoring), then print the leaderboard. Near-zero scores for the demo model are
# the honest result for a ~5M-parameter model trained for minutes on CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
data_dir="${DATA_DIR:-../shared/data}"
data_args=()
[ -d "$data_dir" ] && data_args=(--data-dir "$data_dir")
common=(--tasks humaneval,mbpp --allow_code_execution --executor "${EXECUTOR:-docker}" "${data_args[@]}")

echo "== demo model (built once, then cached) =="
model=$("$bin/codeeval" demo-model)
echo "== reference oracle =="
"$bin/codeeval" run --model reference "${common[@]}" --output-dir runs/demo-reference
echo "== demo model: greedy, 128 new tokens =="
"$bin/codeeval" run --model "$model" "${common[@]}" --do_sample false --max_new_tokens 128 \
    --output-dir runs/demo-model
echo
echo "== leaderboard =="
"$bin/codeeval" leaderboard runs/demo-reference runs/demo-model
