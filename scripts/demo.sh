#!/usr/bin/env bash
# The main job (`make demo` does the set-up first: venv, Docker engine, images, SmolLM2):
#   1. the `reference` oracle on HumanEval and MBPP (164/164 and 499/500 under bigcode's rules);
#   2. GPT-4's released HumanEval solutions (Reflexion's simple_gpt-4 log) scored through the
#      replay backend, beside the authors' own count;
#   3. SmolLM2-135M-Instruct (GGUF, Apache-2.0) greedy, with its chat template, answering freely
#      (--chat_style free scored best for it: docs/generation.md), on the first $SMOLLM2_PROBLEMS
#      HumanEval problems (a subset: CPU generation is the slow part);
# then the leaderboard, with the number of problems each row covered. Every run goes through
# the whole flow (generation, execution in the Docker sandbox, scoring); a re-run reuses them.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
data_dir="${DATA_DIR:-../shared/data}"
smol_n="${SMOLLM2_PROBLEMS:-30}"
common=(--allow_code_execution --executor "${EXECUTOR:-docker}")
if [ -d "$data_dir" ]; then
    common+=(--data-dir "$data_dir")
    export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"  # every input is local: no hub retries
fi
gpt4="$data_dir/humaneval/released/reflexion_gpt4/simple_gpt-4_humaneval-py.jsonl.gz"
runs=(runs/demo-reference)
start=$SECONDS
took() { echo "-- $1 took $((SECONDS - $2)) s"; }

echo "== 1. reference oracle: HumanEval and MBPP =="
t=$SECONDS
"$bin/codeeval" run --model reference --tasks humaneval,mbpp "${common[@]}" --output-dir runs/demo-reference
took "the oracle" "$t"

if [ -f "$gpt4" ]; then
    echo "== 2. GPT-4, released HumanEval solutions (Reflexion), replayed =="
    t=$SECONDS
    "$bin/codeeval" run --model "gpt-4 (reflexion log)" --tasks humaneval --load_generations_path "$gpt4" \
        "${common[@]}" --output-dir runs/demo-gpt4
    "$bin/python" - "$gpt4" runs/demo-gpt4/results.json <<'EOF'
import json, sys
from pathlib import Path
published = json.loads((Path(sys.argv[1]).parent / "published_scores.json").read_text())
log = published["scores_from_logs"][Path(sys.argv[1]).name]
task = json.loads(Path(sys.argv[2]).read_text())["codeeval"]["tasks"]["humaneval"]
print(f"GPT-4: {task['passed']}/{task['problems']} pass here; the authors' log says "
      f"{log['solved']}/{log['total']} (published_scores.json)")
EOF
    runs+=(runs/demo-gpt4)
    took "GPT-4 replay" "$t"
else
    echo "== 2. skipped: $gpt4 not found =="
fi

echo "== 3. SmolLM2-135M-Instruct: greedy, chat template, free answers, first $smol_n HumanEval problems =="
t=$SECONDS
smollm2=.cache/models/SmolLM2-135M-Instruct
"$bin/python" scripts/fetch-smollm2.py --dir "$smollm2" >/dev/null  # instant once fetched (make smollm2)
"$bin/codeeval" run --model "$smollm2" --tasks humaneval --limit "$smol_n" "${common[@]}" \
    --apply_chat_template --chat_style free --do_sample false --max_new_tokens 256 \
    --output-dir runs/demo-smollm2
runs+=(runs/demo-smollm2)
took "SmolLM2" "$t"

echo
echo "== leaderboard =="
"$bin/codeeval" leaderboard "${runs[@]}"
took "the demo's runs" "$start"
