"""PAL (GSM8K, GSM-Hard): bigcode's prompts and post-processing, answers read from real
executions in the Docker sandbox, and its accuracy with failed runs discarded and votes."""
from __future__ import annotations

import json

import pytest
from docker_env import ensure_images

from codeeval.benchmarks import pal
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Sample
from codeeval.executors.docker.sandbox import DockerSandbox
from codeeval.pipeline.execute import execute_rows, verdict_of


@pytest.fixture(scope="module")
def gsm8k(data_dir):
    return get_task("pal-gsm8k-greedy").load(LoadOptions(data_dir))


@pytest.fixture(scope="module")
def sandbox():
    ensure_images()
    with DockerSandbox(n_workers=2) as box:
        yield box


def test_prompt_is_bigcodes_eight_shots(gsm8k, data_dir):
    shots = json.loads((data_dir / "bigcode_fewshot" / "gsm8k_few_shot_prompts.json").read_text())
    prompt = gsm8k[0].prompt
    assert len(gsm8k) == 1319 and prompt.count("# solution in Python:") == 9
    assert prompt.startswith(f'Q: {shots["questions"][0]}\n\n# solution in Python:\n\n\ndef solution():\n    """'
                             f'{shots["questions"][0]}"""\n{shots["solutions"][0]}\n\n\n\n\n\n')
    assert prompt.endswith(f"Q: {gsm8k[0].record['question']}\n\n# solution in Python:\n\n\n")
    assert pal.target(gsm8k[0]) == 18 and pal.parse_target(" 1,234 ") == 1234 and pal.parse_target("2.5") == 2.5
    hard = get_task("pal-gsmhard-greedy").load(LoadOptions(data_dir))
    assert len(hard) == 1319 and pal.target(hard[0]) == hard[0].record["target"]


def test_postprocess_takes_the_answer_after_the_ninth_mark_and_cuts_at_q(gsm8k):
    p = gsm8k[0]
    raw = "def solution():\n    return 1\n\n\n\nQ: next question\n\n# solution in Python:\n\ndef x(): pass"
    assert pal.postprocess(p, raw) == "def solution():\n    return 1\n\n\n\n\nprint(solution())"
    # no stop word (nor eos text) is cut by the post-processing, as in bigcode
    assert pal.postprocess(p, "    x = 2\n<eos>").endswith("x = 2\n<eos>\nprint(solution())")


def run(task_name, problem, completions, sandbox):
    task = get_task(task_name)
    rows = [{"task_id": problem.task_id, "sample": i, "completion": c} for i, c in enumerate(completions)]
    executed = execute_rows(task, [problem], rows, sandbox)
    return task, [Sample(r["task_id"], r["sample"], c, verdict_of(r)) for r, c in zip(executed, completions)]


def test_answers_from_real_runs_and_the_votes(gsm8k, sandbox):
    problem = gsm8k[0]  # target 18
    completions = [
        "def solution():\n    raise ValueError('no')\nprint(solution())",  # fails: discarded
        "def solution():\n    print(18)\nprint(solution())",  # prints instead of returning: last line 'None'
        "def solution():\n    return 18\nprint(solution())",
        "import sys\ndef solution():\n    print('to stderr', file=sys.stderr)\n    return 17.9995\nprint(solution())",
        "def solution():\n    return 18\nprint(solution())\nprint('trailing', file=__import__('sys').stderr)",
        "def solution():\n    while True:\n        pass\nprint(solution())",  # CPU limit: failed
        "def solution():\n    return 18\n",  # exits 0 having printed nothing
    ]
    task, samples = run("pal-gsm8k-greedy", problem, completions, sandbox)
    answers = [s.verdict.answer for s in samples]
    assert answers == [None, "None", "18", "17.9995", "trailing", None, None]
    assert [s.verdict.passed for s in samples] == [False, False, True, True, False, False, False]
    # every status but `passed` is a problem in num_failed_execution when it is a problem's only sample
    assert [s.verdict.status for s in samples] == [
        "failed", "not_a_number", "passed", "passed", "not_a_number", "timeout", "no_answer"]
    for sample in samples:
        failed = task.metrics[0].compute([problem], [sample], [])["num_failed_execution"]
        assert failed == (sample.verdict.status != "passed"), sample
    accuracy = task.metrics[0]
    # greedy: the first answer of a run that did not fail ('None': not a number, counted as failed)
    assert accuracy.compute([problem], samples, []) == {"accuracy": 0.0, "num_failed_execution": 1}
    assert accuracy.compute([problem], samples[2:], []) == {"accuracy": 1.0, "num_failed_execution": 0}
    # every run failed: the answer is "" and counts as a failed execution
    assert accuracy.compute([problem], [samples[0], samples[5]], []) == {"accuracy": 0.0, "num_failed_execution": 1}
    vote = get_task("pal-gsm8k-majority_voting").metrics[0]
    assert vote.compute([problem], samples, []) == {"accuracy": 0.0, "num_failed_execution": 1}  # 'None' first of ties
    assert vote.compute([problem], samples[2:5] + samples[2:3], []) == {"accuracy": 1.0, "num_failed_execution": 0}
    # a tie goes to the earliest sample's answer
    tie = [samples[3], samples[2]]
    assert vote.compute([problem], tie, [])["accuracy"] == 1.0  # 17.9995 is within 1e-3 of 18
    tie = [samples[4], samples[2]]
    assert vote.compute([problem], tie, []) == {"accuracy": 0.0, "num_failed_execution": 1}


def test_reference_programs_print_their_targets(gsm8k, data_dir, sandbox):
    hard = get_task("pal-gsmhard-greedy").load(LoadOptions(data_dir))
    for name, problem in (("pal-gsm8k-greedy", gsm8k[5]), ("pal-gsmhard-greedy", hard[0])):
        task, [sample] = run(name, problem, [pal.reference_solution(problem)], sandbox)
        assert sample.verdict.passed and float(sample.verdict.answer) == pal.target(problem)


def test_results_json_statuses_add_up_to_num_failed_execution(prefect_api, gsm8k, data_dir, tmp_path, capsys):
    """Greedy PAL through the CLI: one sample per problem, so the problems in num_failed_execution
    are exactly the samples whose status is not `passed` (failed, timeout, no_answer, not_a_number)."""
    from codeeval.cli import main

    programs = [pal.reference_solution(gsm8k[0]), "raise ValueError('no')", "x = 1",
                "print('no idea')", "while True:\n    pass", pal.reference_solution(gsm8k[5])]
    saved = tmp_path / "generations.json"
    saved.write_text(json.dumps([[p] for p in programs]))
    out = tmp_path / "out"
    assert main(["run", "--tasks", "pal-gsm8k-greedy", "--limit", str(len(programs)), "--load_generations_path",
                 str(saved), "--allow_code_execution", "--data-dir", str(data_dir), "--output-dir", str(out)]) == 0
    capsys.readouterr()
    results = json.loads((out / "results.json").read_text())
    statuses = results["codeeval"]["tasks"]["pal-gsm8k-greedy"]["statuses"]
    assert statuses == {"failed": 1, "no_answer": 1, "not_a_number": 1, "passed": 2, "timeout": 1}
    assert results["pal-gsm8k-greedy"]["num_failed_execution"] == sum(statuses.values()) - statuses["passed"] == 4
