"""APPS as bigcode-evaluation-harness prompts it and codeparrot/apps_metric scores it:
`apps-<introductory|interview|competition>` (bigcode's finetuning prompt) and
`apps-<level>-fewshot` (the two-example prompt of bigcode's earlier lm_eval harness).

The metric runs offline: codeeval/benchmarks/apps/harness.py reproduces apps_metric's `run_test` in the
sandbox (call-based and standard-input tests, the import header, the comparison cascade, the
-1/-2 codes, 4 s per test and 11 s per sample, on the program's clock and in CPU time), and `AppsAccuracy` its
`get_results`: average and strict accuracy when every problem has one sample, pass@k
otherwise. bigcode HEAD cannot score APPS at all (`level` is undefined in process_results,
bigcode #206/#310); here the level is the task's. docs/deviations.md lists the differences.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from codeeval.benchmarks.apps.data import LEVELS, MALFORMED, load_records
from codeeval.benchmarks.harness_text import harness_text
from codeeval.benchmarks.metrics import by_problem, pass_at_k
from codeeval.benchmarks.spec import Execution, LoadOptions, Metric, Problem, Sample, TaskSpec, Verdict
from codeeval.core.errors import UsageError
from codeeval.executors.base import PASSED, SANDBOX_ERROR, TIMEOUT, Outcome, Program

HF_DATASET = "codeparrot/apps"
HARNESS = harness_text("apps")
STOP_WORDS = ("\nQUESTION", "\n---", "\nANSWER")
SAMPLE_TIMEOUT_S = 11.0  # apps_metric's check_correctness: join(timeout + 1), timeout = 10
DEFAULT_KS = (1, 2, 3, 5, 10, 100)  # bigcode's k_list for APPS

# bigcode's lm_eval/few_shot_examples/apps_few_shot_prompts.json (one example per call type)
FEW_SHOT = {
    "problem_type1": "For an integer x find the largest positive integer y, which doesn't exceed x, and has the "
                     "maximum sum of digits. \n\n-----Input-----\n\nThe positive integer x \n\n-----Output-----\n\n"
                     "Print y.\n\n-----Examples-----\nInput\n100\n\nOutput\n99\n\nInput\n48\n\nOutput\n48",
    "solution_type1": "x = int(input())\nif x < 10:\n    print(x)\nelif x == int(str(x)[0] + '9'*(len(str(x))-1)):\n"
                      "    print(x)\nelse:\n    a = str(x)[0] + '9' * (len(str(x)) - 1)\n    a = list(a)\n"
                      "    for i in range(len(a) - 1, -1, -1):\n        k = a[i]\n        a[i] = str(int(a[i]) - 1)\n"
                      "        if x >= int(''.join(a)):\n            print(int(''.join(a)))\n            break\n"
                      "        a[i] = k\n",
    "problem_type2": "Given n, how many structurally unique BST's (binary search trees) that store values 1 ...\u00a0n?"
                     "\n\nExample:\n\nInput: 3\nOutput: 5",
    "solution_type2": "class Solution:\n     def numTrees(self, n):\n         res = [0] * (n+1)\n"
                      "         res[0] = res[1] = 1            \n         for i in range(2,n+1):\n"
                      "             for j in range(1,i+1):\n                 res[i] += res[j-1] * res[i-j]\n"
                      "         return res[-1]",
}
FEW_SHOT_HEADER = ("Implement answers to the following questions:\nQUESTION:\n" + FEW_SHOT["problem_type1"]
                   + "\nUse Standard Input format\nANSWER:\n" + FEW_SHOT["solution_type1"] + "\nQUESTION:\n"
                   + FEW_SHOT["problem_type2"] + "\nUse Call-Based format\nANSWER:\n" + FEW_SHOT["solution_type2"]
                   + "\n")


def fn_name(record: dict) -> Any:
    try:
        return json.loads(record["input_output"]).get("fn_name")
    except (ValueError, AttributeError):
        return None


def finetuning_prompt(record: dict) -> str:
    """bigcode's get_prompt: question, starter code, the call format, then the answer mark."""
    call_format = "\nUse Call-Based format" if fn_name(record) else "\nUse Standard Input format"
    return "\nQUESTION:\n" + record["question"] + (record["starter_code"] or "") + call_format + "\nANSWER:\n"


def _loader(level: str, fewshot: bool):
    def load(options: LoadOptions) -> list[Problem]:
        records = load_records(options, level)
        head = FEW_SHOT_HEADER if fewshot else ""
        return [Problem(f"APPS/{r['problem_id']}", i, head + finetuning_prompt(r), r) for i, r in enumerate(records)]

    return load


def postprocess(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """bigcode's: the text after the first "\\nANSWER:" of prompt + generation (the whole text if
    none), with no cut at stop words. The few-shot examples are taken off first (their own
    ANSWER marks would otherwise win)."""
    text = (problem.prompt + continuation).removeprefix(FEW_SHOT_HEADER if problem.prompt.startswith(
        FEW_SHOT_HEADER) else "")
    parts = text.split("\nANSWER:", 1)
    return parts[1] if len(parts) > 1 else text


def reference_solution(problem: Problem) -> str:
    """The record's first solution (the `reference` backend's oracle)."""
    try:
        solutions = json.loads(problem.record["solutions"] or "[]")
    except ValueError:  # not JSON: no oracle (its samples fail, visibly)
        return ""
    return solutions[0] if isinstance(solutions, list) and solutions and isinstance(solutions[0], str) else ""


NO_TESTS = '{"inputs": [], "outputs": []}'  # what a malformed record's sandbox gets (its verdict is -2)


def n_tests(problem: Problem) -> int:
    return len(json.loads(problem.record["input_output"])["inputs"])


@dataclass(frozen=True)
class AppsTests(Execution):
    """Each sample through the APPS harness; its per-test results are the verdict's `tests`."""

    timeout_s: float = SAMPLE_TIMEOUT_S

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        io = NO_TESTS if problem.record.get(MALFORMED) else problem.record["input_output"]
        files = {"io.json": io.encode(), "solution.py": completion.encode()}
        return Program("", HARNESS, timeout_s=self.timeout_s, guard=True, preimport=("numpy", "unittest.mock"),
                       files=files)

    def judge(self, problem: Problem, outcome: Outcome, prepared: Any = None) -> Verdict:
        if problem.record.get(MALFORMED):  # apps_metric: json.loads fails, the sample gets [-2]
            return Verdict("failed", False, (-2,), detail="input_output is empty or malformed: a compile error (-2), "
                                                         "as apps_metric scores it")
        if outcome.status == SANDBOX_ERROR:
            return Verdict(SANDBOX_ERROR, False, detail=outcome.detail)
        results = None
        if outcome.status == PASSED:  # the harness ran to its end: its line is the last one
            reports = outcome.reports(lambda data: isinstance(data.get("results"), list))
            results = reports[-1]["results"] if reports else None
        if results is None:  # apps_metric: the child died or ran out of time -> every test -1
            results = [-1] * n_tests(problem)
            status = TIMEOUT if outcome.status == TIMEOUT else "failed"
            detail = outcome.detail or "the harness did not finish"
        else:
            status, detail = ("passed" if all_passed(results) else "failed"), ""
        tests = tuple(int(r) for r in results)
        return Verdict(status, all_passed(tests), tests, detail=detail)


def all_passed(results: Sequence[int]) -> bool:
    """apps_metric's strict rule: np.all(results > 0) (True for an empty list, as there)."""
    return bool(np.all(np.asarray(results) > 0))


def results_of(sample: Sample) -> list[int]:
    return list(sample.verdict.tests) if sample.verdict is not None else [-2]


@dataclass(frozen=True)
class AppsAccuracy(Metric):
    """apps_metric's get_results. One sample per problem (judged by the first problem, as
    there): avg_accuracy (mean over problems of the share of tests > 0) and strict_accuracy
    (share of problems with every test > 0). More samples: pass@k, a sample being correct iff
    every test > 0. A sample with no verdict counts as [-2] (it was not executed)."""

    reads_completions = False
    name = "apps_accuracy"
    primary = "strict_accuracy"
    uses_k = True
    default_ks: tuple[int, ...] = DEFAULT_KS

    def per_problem(self, problems: Sequence[Problem], samples: Sequence[Sample],
                    ks: Sequence[int]) -> dict[str, dict[str, float]]:
        groups = by_problem(samples)
        ordered = [(p.task_id, groups[p.task_id]) for p in problems if p.task_id in groups]
        if not ordered:
            return {}
        if len(ordered[0][1]) == 1:
            avg, strict = {}, {}
            for task_id, group in ordered:  # the reference's np.asarray(results[index]) > 0, over every test
                flat = np.asarray([r for s in group for r in results_of(s)])
                avg[task_id] = float(np.mean(flat > 0)) if flat.size else float("nan")
                strict[task_id] = float(all_passed(flat))
            return {"avg_accuracy": avg, "strict_accuracy": strict}
        counts = {t: (len(g), sum(all_passed(results_of(s)) for s in g)) for t, g in ordered}
        return {f"pass@{k}": {t: pass_at_k(n, c, k) for t, (n, c) in counts.items()} for k in ks}

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        bad = [p.task_id for p in problems if p.record.get(MALFORMED)]
        malformed = {"malformed_problems": len(bad), "malformed_problem_ids": bad} if bad else {}
        values = self.per_problem(problems, samples, ks)
        if not values:
            return {"avg_accuracy": 0.0, "strict_accuracy": 0.0, **malformed}
        return {**{key: float(np.mean(list(v.values()))) for key, v in values.items()}, **malformed}


def make(name: str) -> TaskSpec:
    level = name.removeprefix("apps-").removesuffix("-fewshot")
    if level not in LEVELS:
        raise UsageError(f"unknown APPS level {level!r}; levels: {', '.join(LEVELS)}")
    fewshot = name.endswith("-fewshot")
    return TaskSpec(
        name=name, family="apps", load=_loader(level, fewshot), stop_words=STOP_WORDS, postprocess=postprocess,
        reference_solution=reference_solution, execution=AppsTests(), metrics=(AppsAccuracy(),),
        hf_dataset=HF_DATASET,
        description=f"APPS test split, {level} problems; {'two-shot' if fewshot else 'finetuning'} prompt; "
                    "avg/strict accuracy (n=1) or pass@k",
    )


TASK_NAMES = [f"apps-{level}{mode}" for level in LEVELS for mode in ("", "-fewshot")]
