"""The metrics registry: how per-sample results aggregate into a task's numbers.

Each Metric returns bigcode's result dict for its task (`process_results`), computed from
persisted per-sample verdicts (lm-evaluation-harness's per-document results plus an
aggregation). Families with a metric of their own (BLEU, APPS accuracy, P/R/F1) define it
beside themselves and register it here by name.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from codeeval.benchmarks.spec import Metric, Problem, Sample
from codeeval.core.errors import UsageError


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n-c, k) / C(n, k), computed stably (Chen et al. 2021; bigcode's code_eval)."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def resolve_ks(task: str, n_min: int, requested: Optional[Sequence[int]],
               default: Sequence[int]) -> tuple[list[int], list[int]]:
    """(ks to report, default ks left out because n is too small).

    A k the user asked for above n is an error; bigcode drops it silently.
    """
    if requested:
        too_big = [k for k in requested if k > n_min]
        if too_big:
            raise UsageError(f"pass@{too_big[0]} needs at least {too_big[0]} samples per problem, "
                             f"but task {task} has n={n_min}")
        bad = [k for k in requested if k < 1]
        if bad:
            raise UsageError(f"k must be >= 1, got {bad[0]}")
        return sorted(set(requested)), []
    return [k for k in default if k <= n_min], [k for k in default if k > n_min]


def by_problem(samples: Sequence[Sample]) -> dict[str, list[Sample]]:
    grouped: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        grouped[s.task_id].append(s)
    return grouped


@dataclass(frozen=True)
class PassAtK(Metric):
    """Mean unbiased pass@k over problems. `subset` scores a named sub-verdict instead of the
    whole one (EvalPlus's base tests); `prefix` names its keys apart ("base_pass@1")."""

    default_ks: tuple[int, ...] = (1, 10, 100)
    subset: Optional[str] = None
    prefix: str = ""
    reads_completions = False
    uses_k = True

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.prefix}pass@k"

    @property
    def primary(self) -> str:  # type: ignore[override]
        return f"{self.prefix}pass@1"

    def passed(self, sample: Sample) -> bool:
        if self.subset is None:
            return sample.passed
        return bool(sample.verdict and sample.verdict.subsets.get(self.subset))

    def per_problem(self, problems: Sequence[Problem], samples: Sequence[Sample],
                    ks: Sequence[int]) -> dict[str, dict[str, float]]:
        counts = {t: (len(g), sum(map(self.passed, g))) for t, g in by_problem(samples).items()}
        return {f"{self.prefix}pass@{k}": {t: pass_at_k(n, c, k) for t, (n, c) in counts.items()} for k in ks}

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        return {key: float(np.mean(list(values.values()))) if values else 0.0
                for key, values in self.per_problem(problems, samples, ks).items()}


Number = Union[int, float, str]


@dataclass(frozen=True)
class AnswerAccuracy(Metric):
    """PAL's metric: the answer a problem's samples agree on, against its target.

    Failed executions (and answers beginning with "failed:") are discarded first; with none
    left the answer is "". `vote="first"` takes the first remaining answer (bigcode's greedy
    variant), `vote="majority"` the most common, ties to the earliest sample. Correct iff
    |float(answer) - float(target)| < tol; an answer or target that is not a number counts
    in `num_failed_execution`, as in bigcode's pal_code_exec."""

    target: Callable[[Problem], Number]
    vote: str = "first"
    tol: float = 1e-3
    reads_completions = False
    name = "accuracy"
    primary = "accuracy"

    def choose(self, answers: list[str]) -> str:
        answers = [a for a in answers if not a.startswith("failed:")] or [""]
        return Counter(answers).most_common()[0][0] if self.vote == "majority" else answers[0]

    def judged(self, problems: Sequence[Problem], samples: Sequence[Sample]) -> dict[str, Optional[bool]]:
        """task_id -> whether the chosen answer is right; None when it (or the target) is no number."""
        groups = by_problem(samples)
        out: dict[str, Optional[bool]] = {}
        for problem in problems:
            answer = self.choose([s.verdict.answer for s in groups.get(problem.task_id, [])
                                  if s.verdict is not None and s.verdict.answer is not None])
            try:
                out[problem.task_id] = abs(float(answer) - float(self.target(problem))) < self.tol
            except ValueError:
                out[problem.task_id] = None
        return out

    def per_problem(self, problems: Sequence[Problem], samples: Sequence[Sample],
                    ks: Sequence[int]) -> dict[str, dict[str, float]]:
        return {"accuracy": {t: float(bool(ok)) for t, ok in self.judged(problems, samples).items()}}

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        judged = self.judged(problems, samples)
        correct = sum(bool(ok) for ok in judged.values())
        errored = sum(ok is None for ok in judged.values())
        return {"accuracy": correct / len(problems) if problems else 0.0, "num_failed_execution": errored}

