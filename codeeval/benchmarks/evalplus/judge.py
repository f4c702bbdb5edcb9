"""Executing HumanEval+ / MBPP+ samples: EvalPlus's differential testing, in the sandbox.

`prepare` computes the expected outputs once per problem by running the canonical solution
on every input inside the sandbox (codeeval/benchmarks/evalplus/harness.py, "truth" mode), with the
seconds each input took on the program's clock (wall time less the time it waited for a CPU); the
result is cached under $CODEEVAL_CACHE/evalplus-truth by a digest
of the problem's data and the harness. The outputs stay opaque bytes here (a pickle made in
the sandbox is only ever unpickled in the sandbox). Each sample then runs the harness in
"check" mode with EvalPlus's limits: max(4 s, 4 x the canonical time) per input, and
min(60 s, their sum) + 2 s per group of inputs (base, plus), each on the clock and in CPU time.
"""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from codeeval.benchmarks.evalplus.mbppplus_inputs import deserialize
from codeeval.benchmarks.harness_text import harness_text
from codeeval.benchmarks.spec import Execution, Problem, Verdict
from codeeval.core.cache import cache_file, read_cached, write_cached
from codeeval.core.fingerprint import digest
from codeeval.executors.base import FAILED, PASSED, SANDBOX_ERROR, TIMEOUT, Outcome, Program

HARNESS = harness_text("evalplus")
GROUPS = ("base", "plus")
MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR, GROUP_CAP_S = 4.0, 4.0, 60.0  # evalplus/config.py and untrusted_check
TRUTH_TIMEOUT_S = 120.0
NOT_RUN = -3  # per-test code of inputs after a group's first failure (EvalPlus stops there)


def group_inputs(problem: Problem) -> dict[str, list]:
    record = problem.record
    if record["task_id"].startswith("Mbpp/"):
        return {g: deserialize(record["task_id"], record[f"{g}_input"]) for g in GROUPS}
    return {g: record[f"{g}_input"] for g in GROUPS}


def problem_file(problem: Problem, mode: str, truth: Optional[Mapping[str, Any]] = None) -> bytes:
    """problem.pkl for the harness: inputs per group and, for checks, their limits and which
    expected outputs it recomputes (`truth` is the truth run's JSON header)."""
    groups = []
    for name, inputs in group_inputs(problem).items():
        group: dict[str, Any] = {"name": name, "inputs": inputs}
        if truth is not None:
            limits = [max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * t) for t in truth["times"][name]]
            group.update(limits=limits, budget=min(GROUP_CAP_S, sum(limits)) + 2.0,
                         recompute=frozenset(truth["recompute"][name]))
        groups.append(group)
    record = problem.record
    return pickle.dumps({"mode": mode, "entry_point": record["entry_point"], "atol": record["atol"],
                         "special": record.get("special", ""), "groups": groups})


@dataclass(frozen=True)
class Prepared:
    files: Mapping[str, bytes]  # problem.pkl and expected.pkl
    timeout_s: float  # the whole program's limit (clock and CPU): every group's budget


def truth_key(problem: Problem) -> str:
    r = problem.record
    return digest("evalplus-truth", HARNESS, r["entry_point"], r.get("special", ""), r["prompt"],
                  r["canonical_solution"], r["base_input"], r["plus_input"])


def canonical(problem: Problem) -> bytes:
    return (problem.record["prompt"] + problem.record["canonical_solution"]).encode()


def truth_program(problem: Problem) -> Program:
    return Program(f"truth:{problem.task_id}", HARNESS, timeout_s=TRUTH_TIMEOUT_S, guard=False, preimport=("numpy",),
                   files={"problem.pkl": problem_file(problem, "truth"), "solution.py": canonical(problem)})


def prepared(problem: Problem, truth: bytes) -> Prepared:
    header, _, expected = truth.partition(b"\n")
    header = json.loads(header)
    files = {"problem.pkl": problem_file(problem, "check", header), "expected.pkl": expected}
    recomputed = sum(len(ix) for ix in header["recompute"].values())
    if recomputed:
        files["canonical.py"] = canonical(problem)
    # the program's limit (clock and CPU): every group's budget, and the recomputed outputs' own time
    spent = sum(t for name, ix in header["recompute"].items() for i, t in enumerate(header["times"][name]) if i in ix)
    budgets = pickle.loads(files["problem.pkl"])["groups"]
    return Prepared(files, sum(g["budget"] for g in budgets) + 2 * spent + 2.0)


def expected_outputs(problems: Sequence[Problem], sandbox) -> dict[str, Prepared]:
    """Each problem's expected outputs, from the cache or computed now in the sandbox."""
    truths = {p.task_id: read_cached(cache_file("evalplus-truth", truth_key(p))) for p in problems}
    todo = [p for p in problems if truths[p.task_id] is None]
    for problem, outcome in zip(todo, sandbox.run([truth_program(p) for p in todo]) if todo else ()):
        if not outcome.passed or b"\n" not in (outcome.result or b""):
            why = outcome.detail or (outcome.stderr_tail.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"{problem.task_id}: the canonical solution failed in the sandbox ({outcome.status}: {why})")
        truths[problem.task_id] = write_cached(cache_file("evalplus-truth", truth_key(problem)), outcome.result)
    return {p.task_id: prepared(p, truths[p.task_id]) for p in problems}


def group_results(outcome: Outcome) -> dict[str, dict]:
    """The harness's last report per group (Outcome.reports: its own line comes last)."""
    return {data["group"]: data for data in outcome.reports(lambda data: data.get("group") in GROUPS)}


class DifferentialTests(Execution):
    """Every base and plus input, judged as the evalplus package judges it."""

    def prepare(self, problems: Sequence[Problem], sandbox) -> Mapping[str, Any]:
        return expected_outputs(problems, sandbox)

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        return Program("", HARNESS, timeout_s=prepared.timeout_s, guard=True, preimport=("numpy",),
                       files={**prepared.files, "solution.py": completion.encode()})

    def judge(self, problem: Problem, outcome: Outcome, prepared: Any = None) -> Verdict:
        if outcome.status == SANDBOX_ERROR:
            return Verdict(SANDBOX_ERROR, False, detail=outcome.detail)
        found = group_results(outcome)
        statuses, tests = {}, []
        for g in GROUPS:
            data = found.get(g, {})
            statuses[g] = data.get("status") or ("timeout" if outcome.status == TIMEOUT else "fail")
            codes = list(data.get("tests", []))
            tests += codes + [NOT_RUN] * (len(problem.record[f"{g}_input"]) - len(codes))
        base = statuses["base"] == "pass"
        plus = base and statuses["plus"] == "pass"
        status = PASSED if plus else TIMEOUT if "timeout" in statuses.values() else FAILED
        detail = "" if plus else f"base {statuses['base']}, plus {statuses['plus']}" + (
            f"; {outcome.detail}" if outcome.detail else "")
        return Verdict(status, plus, tuple(tests), {"base": base, "plus": plus}, detail=detail)


BIGCODE_TEST = '''

import math
import numpy as np
import pickle


def is_floats(x) -> bool:
    if isinstance(x, float):
        return True
    if isinstance(x, (list, tuple)):
        return all(isinstance(i, float) for i in x)
    if isinstance(x, np.ndarray):
        return x.dtype == np.float64 or x.dtype == np.float32
    return False


def assertion(out, exp, atol):
    exact_match = out == exp

    if atol == 0 and is_floats(exp):
        atol = 1e-6
    if not exact_match and atol != 0:
        np.testing.assert_allclose(out, exp, atol=atol)
    else:
        assert exact_match


def check(candidate):
    with open("problem.pkl", "rb") as fh:
        problem = pickle.load(fh)
    with open("expected.pkl", "rb") as fh:
        expected = pickle.load(fh)
    inputs = [inp for group in problem["groups"] for inp in group["inputs"]]
    results = [out for group in problem["groups"] for out in expected[group["name"]]]
    for i, (inp, exp) in enumerate(zip(inputs, results)):
        {check}


check({entry_point})
'''
# HumanEval/32 has many right answers (any root): EvalPlus checks |poly(xs, out)| <= atol instead
FIND_ZERO = "out = candidate(*inp); assert abs(sum(c * math.pow(out, k) for k, c in enumerate(inp[0]))) <= {atol}"


@dataclass(frozen=True)
class OneTestProgram(Execution):
    """bigcode's humanevalplus/mbppplus: the candidate, then one test over every input with
    one time limit (20 s / 10 s), passed iff the program runs to its end."""

    timeout_s: float = 20.0

    def prepare(self, problems: Sequence[Problem], sandbox) -> Mapping[str, Any]:
        return expected_outputs(problems, sandbox)

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        record = problem.record
        atol = record["atol"]
        check = (FIND_ZERO.format(atol=atol) if record.get("special") == "find_zero"
                 else f"assertion(candidate(*inp), exp, {atol!r})")
        code = completion + BIGCODE_TEST.format(check=check, entry_point=record["entry_point"])
        return Program("", code, timeout_s=self.timeout_s, guard=True, preimport=("numpy",),
                       files=dict(prepared.files))
