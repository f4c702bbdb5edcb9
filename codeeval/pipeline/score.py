"""The score stage as plain library code: problems, completions and verdicts in, a TaskScore out."""
from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence

from codeeval.benchmarks.spec import Problem, Sample, TaskSpec
from codeeval.core.contracts import TaskScore
from codeeval.pipeline import uncertainty
from codeeval.pipeline.execute import verdict_of


def samples_of(problems: Sequence[Problem], generations: Sequence[dict],
               executions: Optional[Sequence[dict]]) -> list[Sample]:
    """Generation rows joined with their execution rows, in (problem, sample) order."""
    verdicts = {(r["task_id"], r["sample"]): verdict_of(r) for r in executions or ()}
    order = {p.task_id: p.index for p in problems}
    rows = sorted(generations, key=lambda g: (order[g["task_id"]], g["sample"]))
    return [Sample(g["task_id"], g["sample"], g["completion"], verdicts.get((g["task_id"], g["sample"])))
            for g in rows]


def score_samples(task: TaskSpec, problems: Sequence[Problem], samples: Sequence[Sample],
                  ks: Sequence[int], ks_left_out: Sequence[int] = ()) -> TaskScore:
    computed = [metric.compute(problems, samples, ks) for metric in task.metrics]
    metrics: dict = {}
    for values in computed:
        metrics.update(values)
    primary = primary_key(task, metrics)
    spread = uncertainty.spread(task.metrics, problems, samples, ks, computed)
    judged = [s.verdict for s in samples if s.verdict is not None]
    return TaskScore(
        metrics=metrics, primary=primary, higher_is_better=task.metrics[0].higher_is_better,
        problems=len({s.task_id for s in samples}), samples=len(samples),
        passed=sum(bool(v.passed) for v in judged) if task.executes else None,
        statuses=dict(sorted(Counter(v.status for v in judged).items())), ks_left_out=tuple(ks_left_out),
        stderr=spread.stderr, ci95=spread.ci95, stderr_method=spread.method,
    )


def primary_key(task: TaskSpec, metrics: dict) -> str:
    """The headline key of a task's computed values: the spec's, else the first computed (APPS
    at n > 1 reports pass@k instead of its accuracies)."""
    return task.primary if task.primary in metrics else next(iter(metrics), task.primary)
