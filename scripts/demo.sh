#!/usr/bin/env bash
# The main job (`make demo` does the set-up first: venv, Docker engine, images, SmolLM2):
#   1. the `reference` oracle on HumanEval and MBPP (164/164 and 499/500 under bigcode's rules);
#   2. GPT-4's released HumanEval solutions (Reflexion's simple_gpt-4 log) scored through the
#      replay backend, beside the authors' own count;
#   3. SmolLM2-135M-Instruct (GGUF, Apache-2.0) greedy, with its chat template, answering freely
#      (--chat_style free scored best for it: docs/generation.md), on the first $SMOLLM2_PROBLEMS
#      HumanEval problems (a subset: CPU generation is the slow part);
#   4. one slice (the first $SLICE_PROBLEMS problems, default 2) of each family that runs offline
#      in the Python image: HumanEval+, MBPP+, PAL (GSM8K, GSM-Hard), APPS and ruHumanEval (their
#      test fixtures: invented problems in the upstream formats), CoNaLa (BLEU), CodeSemBench and
#      DevEval (the three projects shipped in ../shared), for the `reference` oracle (one run) and
#      for SmolLM2 (one run: greedy, each family's own prompt without a chat template,
#      $SLICE_MAX_NEW_TOKENS (128) new tokens); the oracle's 1.0 on BLEU and CodeSemBench shows the
#      scoring's shape, not a model;
#   5. the classification tasks (CodeComplex, CodeClone, CodeDefect: their test fixtures), fine-tuned
#      and scored: the oracle, then SmolLM2 trained one epoch on a slice ($CLASSIFY_TRAIN training
#      records, $CLASSIFY_TEST test records of each; its HF directory, made once from the GGUF file);
# then the leaderboard of 1-3 (`codeeval leaderboard`) and every score of the demo with its standard
# error, 95% interval and number of problems, one line each. Every run goes through
# the whole flow (generation, execution in the Docker sandbox, scoring); a re-run reuses them.
# Each step prints its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
data_dir="${DATA_DIR:-../shared/data}"
smol_n="${SMOLLM2_PROBLEMS:-30}"
slice_n="${SLICE_PROBLEMS:-2}"
slice_tokens="${SLICE_MAX_NEW_TOKENS:-128}"
classify_train="${CLASSIFY_TRAIN:-12}"
classify_test="${CLASSIFY_TEST:-6}"
slices=humanevalplus,mbppplus,pal-gsm8k-greedy,pal-gsmhard-greedy,apps-introductory,ruhumaneval,conala,codesembench,deveval
# torch's OpenMP threads spin while they wait: on a 2-core machine shared with other jobs (load 4-7)
# that made SmolLM2's generation 6-8x slower (3 x 32 greedy tokens: 23 s spinning, 3 s passive;
# step 3 took 410 s, then 174 s, same answers). The answers do not depend on it.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
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
from codeeval.core.results import RunResults
published = json.loads((Path(sys.argv[1]).parent / "published_scores.json").read_text())
log = published["scores_from_logs"][Path(sys.argv[1]).name]
task = RunResults.from_json(json.loads(Path(sys.argv[2]).read_text())).tasks["humaneval"]
print(f"GPT-4: {task.passed}/{task.problems} pass here; the authors' log says "
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

# The slices need their data in one --data-dir: every folder of $data_dir beside the APPS and
# ruHumanEval test fixtures (links, rebuilt on each run; nothing is copied).
slice_runs=()
if [ -d "$data_dir" ]; then
    slice_data=.cache/demo-data
    rm -rf "$slice_data" && mkdir -p "$slice_data"
    for d in "$(cd "$data_dir" && pwd)"/*; do ln -s "$d" "$slice_data/"; done
    for d in apps ruhumaneval; do ln -sfn "$PWD/tests/fixtures/$d" "$slice_data/$d"; done
    slice_common=(--tasks "$slices" --limit "$slice_n" --allow_code_execution --executor "${EXECUTOR:-docker}"
                  --data-dir "$slice_data")

    echo "== 4a. one slice of each family (first $slice_n problems): the reference oracle =="
    t=$SECONDS
    "$bin/codeeval" run --model reference "${slice_common[@]}" --output-dir runs/demo-slices-reference
    slice_runs+=(runs/demo-slices-reference)
    took "the slices' oracle" "$t"

    echo "== 4b. the same slices: SmolLM2-135M-Instruct, greedy, $slice_tokens new tokens =="
    t=$SECONDS
    "$bin/codeeval" run --model "$smollm2" "${slice_common[@]}" --do_sample false --max_new_tokens "$slice_tokens" \
        --output-dir runs/demo-slices-smollm2
    slice_runs+=(runs/demo-slices-smollm2)
    took "SmolLM2's slices" "$t"
else
    echo "== 4. skipped: the slices need $data_dir =="
fi

echo "== 5. the classification tasks, fine-tuned (a slice of each): the oracle, then SmolLM2 for one epoch =="
t=$SECONDS
classify=(--tasks codecomplex,codeclone,codedefect --data-dir tests/fixtures/classification --limit "$classify_test")
"$bin/codeeval" run --model reference "${classify[@]}" --output-dir runs/demo-classify-reference
smollm2_hf=$("$bin/python" scripts/fetch-smollm2.py --dir "$smollm2" --hf)  # made once (~20 s), then instant
"$bin/codeeval" run --model "$smollm2_hf" "${classify[@]}" --num_epochs 1 --max_train_samples "$classify_train" \
    --max_eval_samples "$classify_test" --max_length 256 --output-dir runs/demo-classify-smollm2
slice_runs+=(runs/demo-classify-reference runs/demo-classify-smollm2)
took "the classification tasks" "$t"

echo
echo "== leaderboard =="
"$bin/codeeval" leaderboard "${runs[@]}"
echo
echo "== every score of the demo: its standard error, 95% interval and problems (slices: first $slice_n;" \
     "classification: $classify_test test records) =="
"$bin/codeeval" leaderboard --scores "${runs[@]}" "${slice_runs[@]}"
took "the demo's runs" "$start"
