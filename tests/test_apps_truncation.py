"""APPS prompts longer than --max_length_generation: codeeval reports `prompt_too_long` and scores
the post-processed empty continuation; bigcode HEAD truncates the prompt instead. This file shows,
with a real tokenizer, the real generation stage and the real sandbox, that the two give the same
program (left truncation, bigcode's default) or the same per-test codes and metric values
(right truncation, bigcode's --left_padding), for both call types (docs/deviations.md, APPS).

bigcode's side is its code path written out (bigcode_eval/utils.py TokenizedDataset and
complete_code, tasks/apps.py postprocess_generation; main.py sets truncation_side="left" unless
--left_padding): tokenise with truncation=True, max_length=L; transformers >= 4.40.2 raises on an
input of exactly max_length tokens and bigcode then returns the input as the generation; decode
with skip_special_tokens=True; keep the text after the first "\\nANSWER:", or all of it.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from docker_env import ensure_images, unstretched

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Sample
from codeeval.executors.docker.sandbox import DockerSandbox
from codeeval.generation import BackendSpec, GenerationArgs
from codeeval.generation.hf.transformers_backend import TransformersBackend
from codeeval.pipeline.execute import execute_rows, verdict_of
from codeeval.pipeline.generate import generate_rows

FIXTURES = Path(__file__).parent / "fixtures"
TASKS = ("apps-interview", "apps-competition", "apps-introductory")  # both call types in each


def bigcode_program(tokenizer, prompt: str, max_length: int, side: str) -> str:
    """What bigcode HEAD scores for a prompt of at least max_length tokens."""
    tokenizer.truncation_side = side
    ids = tokenizer([prompt], truncation=True, max_length=max_length)["input_ids"][0]
    assert len(ids) == max_length  # the whole budget is the prompt: generate() raises, input returned
    text = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=True)
    try:
        return text.split("\nANSWER:", 1)[1]
    except IndexError:  # "happens when prompts were very long and got truncated"
        return text


def accuracy(task, problems, rows, ks):
    samples = [Sample(r["task_id"], r["sample"], "", verdict_of(r)) for r in rows]
    return task.metrics[0].compute(problems, samples, ks)


@pytest.mark.parametrize("name", TASKS + ("apps-interview-fewshot",))
def test_prompt_too_long_scores_as_bigcodes_truncated_prompt(name, demo_model_dir):
    from transformers import AutoTokenizer

    task = get_task(name)
    problems = task.load(LoadOptions(FIXTURES))
    assert {bool(p.record["input_output"].count("fn_name")) for p in problems} == {True, False}
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    lengths = [len(tokenizer(p.prompt)["input_ids"]) for p in problems]
    mark = len(tokenizer("\nUse Standard Input format\nANSWER:\n")["input_ids"])
    for max_length in (min(lengths) - 1, mark + 1):  # every prompt over budget; the mark still fits
        backend = TransformersBackend(BackendSpec("transformers", demo_model_dir, GenerationArgs(
            do_sample=False, max_length_generation=max_length)))
        ours = generate_rows(task, problems, problems, {p.task_id: 1 for p in problems}, backend)
        assert {r["finish_reason"] for r in ours} == {"prompt_too_long"}
        assert [r["completion"] for r in ours] == ["\n"] * len(problems)
        if name.endswith("-fewshot"):
            continue  # bigcode HEAD has no few-shot setup to compare with
        # bigcode's default (left truncation keeps "...ANSWER:\n"): byte for byte the same program
        assert [bigcode_program(tokenizer, p.prompt, max_length, "left") for p in problems] == \
            [r["completion"] for r in ours]


@pytest.fixture(scope="module")
def sandbox():
    ensure_images()
    with DockerSandbox(n_workers=2, limits=unstretched()) as box:
        yield box


@pytest.mark.parametrize("name", TASKS[:2])
def test_right_truncation_fails_as_the_empty_program(name, demo_model_dir, sandbox):
    """--left_padding: bigcode keeps the prompt's start ("\\nQUESTION:\\n..."), which does not
    compile (or, when only the last newline is lost, the text after the mark: ""); the empty
    program does not compile either: the same per-test codes, so the same metric values."""
    from transformers import AutoTokenizer

    task = get_task(name)
    problems = task.load(LoadOptions(FIXTURES))
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    shortest = min(len(tokenizer(p.prompt)["input_ids"]) for p in problems)
    mark = len(tokenizer("\nUse Standard Input format\nANSWER:\n")["input_ids"])
    theirs = {}  # the mark survives only where just its last newline is lost: the program is ""
    for max_length in (shortest - 1, mark + 1):
        for p in problems:
            program = bigcode_program(tokenizer, p.prompt, max_length, "right")
            assert program.startswith("\nQUESTION:\n") or program == "", program
            theirs.setdefault(p.task_id, []).append(program)
    assert {len(set(programs)) for programs in theirs.values()} == {2}
    assert any("" in programs for programs in theirs.values())
    rows = {"ours": [{"task_id": p.task_id, "sample": i, "completion": "\n"} for p in problems for i in range(2)],
            "bigcode": [{"task_id": p.task_id, "sample": i, "completion": c} for p in problems
                        for i, c in enumerate(theirs[p.task_id])]}
    executed = {k: execute_rows(task, problems, v, sandbox) for k, v in rows.items()}
    for side, done in executed.items():
        assert not any(r["passed"] for r in done), side
        assert all(max(r["tests"]) <= 0 for r in done), side
        assert accuracy(task, problems, done, [1, 2]) == {"pass@1": 0.0, "pass@2": 0.0}, side
        first = [r for r in done if r["sample"] == 0]
        assert accuracy(task, problems, first, [1]) == {"avg_accuracy": 0.0, "strict_accuracy": 0.0}, side
    # neither compiles (an empty program leaves the standard-input wrapper an empty body): [-2] each
    assert [r["tests"] for r in executed["ours"]] == [r["tests"] for r in executed["bigcode"]] == \
        [[-2]] * len(rows["ours"])
    # and with a reference solution beside them, both give the same values
    ref = [{"task_id": p.task_id, "sample": 0, "completion": task.reference_solution(p)} for p in problems]
    mixed = {k: execute_rows(task, problems, ref[:1] + [r for r in v[2:] if r["sample"] == 0], sandbox)
             for k, v in rows.items()}
    assert accuracy(task, problems, mixed["ours"], [1]) == accuracy(task, problems, mixed["bigcode"], [1]) == \
        {"avg_accuracy": pytest.approx(1 / len(problems)), "strict_accuracy": pytest.approx(1 / len(problems))}
