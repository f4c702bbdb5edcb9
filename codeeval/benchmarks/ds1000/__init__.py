"""DS-1000 as bigcode-evaluation-harness runs it: `ds1000-<lib>-<completion|insertion>` for lib
in all, numpy, scipy, pandas, tensorflow, pytorch, sklearn, matplotlib.

Prompts, stop words and post-processing are bigcode's. Insertion prompts are a FIM pair
(`prefix.strip() + "\\n"`, `"\\n" + suffix.strip() + "\\n"`); Matplotlib has no insertion
problems, so `ds1000-matplotlib-insertion` runs completion and `ds1000-all-insertion` leaves
Matplotlib out, as there. Problems are read from either upstream format
(codeeval/benchmarks/ds1000/data.py) and executed in the DS-1000 image (`Execution.runtime = "ds1000"`):
2022 problems by codeeval/benchmarks/ds1000/harness.py, as HKUNLP's DS1000Problem.test; current-format
problems by their own `test_execution` program, as xlang-ai's test_ds1000.py. The metric is
bigcode's mean pass@1, overall and per library. docs/deviations.md lists the differences.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from codeeval.benchmarks.ds1000.data import HF_DATASET, LIBS, load_records
from codeeval.benchmarks.harness_text import harness_text
from codeeval.benchmarks.metrics import by_problem
from codeeval.benchmarks.spec import Execution, LoadOptions, Metric, Problem, Prompting, Sample, TaskSpec, Verdict
from codeeval.benchmarks.text import cut_at_stop
from codeeval.executors.base import PASSED, SANDBOX_ERROR, Outcome, Program

HARNESS = harness_text("ds1000")
STOP_WORDS = ("</code>", "# SOLUTION END")
CASE_TIMEOUT_S = 60.0  # HKUNLP's time_limit per test case (2022 format)
NEW_TIMEOUT_S = 120.0  # xlang-ai's check_correctness timeout (current format)
KEYS = {"all": LIBS, **{lib.lower(): (lib,) for lib in LIBS}}


def libs_of(key: str, mode: str) -> tuple[str, ...]:
    if key == "all" and mode == "Insertion":
        return tuple(lib for lib in LIBS if lib != "Matplotlib")  # bigcode: only a warning
    return KEYS[key]


def mode_of(key: str, mode: str) -> str:
    return "Completion" if key == "matplotlib" else mode  # bigcode: "Running Completion."


def _loader(key: str, mode: str):
    def load(options: LoadOptions) -> list[Problem]:
        records = load_records(options, libs_of(key, mode), mode)
        return [Problem(f"DS1000/{r['lib']}/{mode}/q{r['problem_id']}", i, r["prompt"], r)
                for i, r in enumerate(records)]

    return load


def fim_parts(problem: Problem) -> tuple[str, str]:
    prefix, suffix = problem.prompt.split("[insert]")
    return f"{prefix.strip()}\n", f"\n{suffix.strip()}\n"


def postprocess_completion(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """bigcode's: keep what follows the first "BEGIN SOLUTION\\n<code>", then the first
    "# SOLUTION START" (in prompt + generation), cut at every stop word (eos included), strip."""
    text = problem.prompt + continuation
    for start in ("BEGIN SOLUTION\n<code>", "# SOLUTION START"):
        text = text.split(start, 1)[-1]
    return cut_at_stop(text, STOP_WORDS + extra_stops).strip()


def postprocess_insertion(problem: Problem, continuation: str, extra_stops: tuple[str, ...] = ()) -> str:
    """Insertion: the infilled middle, cut at every stop word and stripped."""
    return cut_at_stop(continuation, STOP_WORDS + extra_stops).strip()


def reference_solution(problem: Problem) -> str:
    return problem.record["reference_code"]


def new_format_program(problem: Problem, code: str) -> str:
    """xlang-ai's test program: the problem's test module, then its test_execution (and
    test_string when the module has one) on the sample."""
    context = problem.record["code_context"]
    tail = "test_string(code)\n" if "test_string(" in context else "\n"
    return context + "\n" + f"code = {code!r}\n" + "test_execution(code)\n" + tail


@dataclass(frozen=True)
class DS1000Tests(Execution):
    """One sample in the DS-1000 image: the 2022 harness, or the current format's test program."""

    runtime = "ds1000"

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> Program:
        r = problem.record
        if r["format"] == "2024":
            return Program("", new_format_program(problem, completion), timeout_s=NEW_TIMEOUT_S, guard=False)
        bundle = {**{k: r[k] for k in ("files", "code_context", "lib", "test_type", "test_case_cnt")},
                  "case_limit_s": CASE_TIMEOUT_S}
        cases = max(1, int(r["test_case_cnt"]))
        # every case's 60 seconds (clock and CPU), and the harness's own loading and judging
        return Program("", HARNESS, timeout_s=cases * CASE_TIMEOUT_S + 30.0, guard=False,
                       files={"problem.json": json.dumps(bundle).encode(), "solution.py": completion.encode()})

    def judge(self, problem: Problem, outcome: Outcome, prepared: Any = None) -> Verdict:
        if problem.record["format"] == "2024" or outcome.status == SANDBOX_ERROR:
            return Verdict(outcome.status, outcome.passed, detail=outcome.detail)
        reports = outcome.reports(lambda data: "cases" in data)
        report = reports[-1] if reports else None
        if outcome.status != PASSED or report is None:
            return Verdict(outcome.status if outcome.status != PASSED else "failed", False,
                           detail=outcome.detail or "the DS-1000 harness did not finish")
        passed = bool(report["passed"])
        codes = [f"exit {c}" for c in report.get("exit_codes", []) if c]
        return Verdict(PASSED if passed else "failed", passed, tuple(report["cases"]),
                       detail="" if passed else "; ".join(codes) or "wrong result")


@dataclass(frozen=True)
class MeanPassAt1(Metric):
    """bigcode's `mean pass@1 accuracy (<n> samples)` = correct samples / problems / n, and the
    same per library (`pass@1/<Lib>`) when the task spans several."""

    reads_completions = False
    name = "mean_pass@1"
    primary = "pass@1"

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        groups = by_problem(samples)
        scored = [(p.record["lib"], groups.get(p.task_id, [])) for p in problems if p.task_id in groups]
        n = max((len(g) for _, g in scored), default=1)
        total = sum(s.passed for _, g in scored for s in g)
        out: dict[str, Any] = {"pass@1": total / len(scored) / n if scored else 0.0,
                               f"mean pass@1 accuracy ({n} samples)": total / len(scored) / n if scored else 0.0}
        libs = list(dict.fromkeys(lib for lib, _ in scored))
        if len(libs) > 1:
            for lib in libs:
                mine = [g for l_, g in scored if l_ == lib]
                out[f"pass@1/{lib}"] = sum(s.passed for g in mine for s in g) / len(mine) / n
        return out


def make(name: str) -> TaskSpec:
    _, key, mode_name = name.split("-")
    mode = mode_of(key, mode_name.capitalize())
    insertion = mode == "Insertion"
    return TaskSpec(
        name=name, family="ds1000", load=_loader(key, mode), stop_words=STOP_WORDS,
        postprocess=postprocess_insertion if insertion else postprocess_completion,
        reference_solution=reference_solution, execution=DS1000Tests(), metrics=(MeanPassAt1(),),
        prompting=Prompting(fim_parts=fim_parts if insertion else None), hf_dataset=HF_DATASET,
        description=f"DS-1000 {', '.join(libs_of(key, mode))}, {mode.lower()} prompts; mean pass@1 "
                    "(executed in the DS-1000 image: make images-ds1000)",
    )


TASK_NAMES = [f"ds1000-{key}-{mode}" for key in ("all", *(lib.lower() for lib in LIBS))
              for mode in ("completion", "insertion")]
