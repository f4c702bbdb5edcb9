"""The score stage as plain library code: problems, completions and verdicts in, a TaskScore out."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

from codeeval.benchmarks.spec import Problem, Sample, TaskSpec
from codeeval.core import artifacts
from codeeval.core.contracts import TaskScore
from codeeval.pipeline import uncertainty
from codeeval.pipeline.execute import verdict_of


# what the score stage reads of the shards: no metric reads an execution's detail or logs, and
# only metrics that say so (Metric.reads_completions) read the completions
KEYS = ("task_id", "sample")
VERDICT_COLUMNS = (*KEYS, "status", "passed", "tests", "subsets", "answer", "score")


def read_samples(task: TaskSpec, problems: Sequence[Problem], generation_paths: Sequence[str],
                 execution_paths: Sequence[str]) -> list[Sample]:
    """The task's samples from its shard files (a classification task's: its prediction files), one
    shard's rows at a time and only the columns its metrics read: the score stage holds a Sample per
    sample, whatever the programs' length."""
    ids = {p.task_id: p.task_id for p in problems}  # one string per problem, not one per row
    verdicts: dict = {}
    for path in execution_paths if task.executes else ():
        for r in artifacts.read_rows(Path(path), VERDICT_COLUMNS):
            verdicts[(ids.get(r["task_id"], r["task_id"]), r["sample"])] = verdict_of(r)
    text = sample_text(task)
    columns = (*KEYS, text) if task.reads_completions else KEYS
    rows = [(ids.get(r["task_id"], r["task_id"]), r["sample"], r.get(text, ""))
            for path in generation_paths for r in artifacts.read_rows(Path(path), columns)]
    return _joined(problems, rows, verdicts)


def sample_folder(task: TaskSpec) -> str:
    """Where a task's samples are: its generations, or a classification task's predictions."""
    return "predictions" if task.classification else "generations"


def sample_text(task: TaskSpec) -> str:
    """The column of a sample's text: the completion, or a prediction's class name."""
    return "predicted_name" if task.classification else "completion"


def samples_of(problems: Sequence[Problem], generations: Sequence[dict],
               executions: Optional[Sequence[dict]], text: str = "completion") -> list[Sample]:
    """Generation rows (or prediction rows, `text` their class) joined with their execution rows, in
    (problem, sample) order."""
    verdicts = {(r["task_id"], r["sample"]): verdict_of(r) for r in executions or ()}
    return _joined(problems, [(g["task_id"], g["sample"], g.get(text, "")) for g in generations], verdicts)


def _joined(problems: Sequence[Problem], rows: list[tuple[str, int, str]], verdicts: dict) -> list[Sample]:
    """(task_id, sample, completion) rows as Samples with their verdicts, in (problem, sample) order."""
    order = {p.task_id: p.index for p in problems}
    rows.sort(key=lambda r: (order[r[0]], r[1]))
    return [Sample(t, s, c, verdicts.get((t, s))) for t, s, c in rows]


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
