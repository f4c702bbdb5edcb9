"""`codeeval compare RUN_A RUN_B`: per task, is B better than A, and is the difference real.

Each task both runs hold is scored again from the run's files (problems, generations and
executions Parquet; a classification task's predictions) over the problems both runs scored, and the difference B - A of the task's
primary metric is tested with the problems paired (docs/statistics.md):

* a pass/fail value per problem on both sides (pass@1 at n=1, PAL's accuracy, APPS's strict
  accuracy at n=1): McNemar's exact test, a two-sided binomial test of the pass->fail count b
  against b + c flips at 1/2; the 95% interval of the mean per-problem difference in closed form;
* otherwise a paired bootstrap over problems (the same draws of problems for both runs): the
  interval is the replicates' 2.5/97.5 percentiles, the p-value the share of replicates, centred
  on the observed difference, at least as far from it as it is from 0.

The problems that flipped each way are listed with where their rows are. Runs of different
problem sets or prompts are refused, in one line naming the task and what differs.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import Metric, Problem, Sample, TaskSpec
from codeeval.core import artifacts
from codeeval.core.errors import UsageError
from codeeval.pipeline import uncertainty
from codeeval.pipeline.problems import read_problems
from codeeval.pipeline.score import primary_key, sample_folder, sample_text, samples_of

RESAMPLES = 1000  # paired bootstrap draws: p-values down to 1/1001
MCNEMAR = "McNemar's exact test"
BOOTSTRAP = f"paired bootstrap over problems ({RESAMPLES} resamples)"


@dataclass(frozen=True)
class Side:
    """One run's files of one task, read back."""

    problems: list[Problem]
    samples: list[Sample]
    scored: frozenset[str]  # problems with every sample judged (or generated, for a task without execution)
    rows: dict[str, str]  # task_id -> where its rows are: "<executions Parquet> sample 0, 1"


@dataclass(frozen=True)
class TaskComparison:
    task: str
    metric: str
    problems: int  # scored by both runs: the pairs tested
    a: float
    b: float
    ci95: tuple[float, float]  # of b - a
    p_value: float
    test: str
    pass_to_fail: tuple[tuple[str, str, str], ...]  # (task_id, where in A, where in B)
    fail_to_pass: tuple[tuple[str, str, str], ...]
    flips: str  # how a problem counts as passed; "" when the metric has no pass/fail per problem

    @property
    def difference(self) -> float:
        return self.b - self.a


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: 2 P(X <= min(b, c)), X ~ Binomial(b + c, 1/2), at most 1."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2.0 * tail)


def bootstrap_p(replicates: np.ndarray, observed: float) -> float:
    """Share of replicates, centred on `observed` (the null: no difference), at least as far from
    0 as `observed` is, counting the observed one: (1 + hits) / (1 + draws)."""
    hits = int(np.sum(np.abs(replicates - observed) >= abs(observed) - 1e-12))
    return (1 + hits) / (1 + len(replicates))


def load_side(root: Path, task: str, spec: TaskSpec) -> Side:
    layout = artifacts.RunLayout(root)
    problems, _ = read_problems(layout.problems(task))
    known = {p.task_id for p in problems}

    def rows_of(folder: str) -> list[tuple[Path, dict]]:
        return [(path, row) for path in sorted((layout.task_dir(task) / folder).glob("shard-*.parquet"))
                for row in artifacts.read_rows(path) if row["task_id"] in known]

    generations = rows_of(sample_folder(spec))
    judged = rows_of("executions") if spec.executes else generations
    located: dict[str, tuple[Path, list[int]]] = {}
    for path, row in judged:
        located.setdefault(row["task_id"], (path, []))[1].append(row["sample"])
    samples = samples_of(problems, [r for _, r in generations], [r for _, r in judged] if spec.executes else None,
                         sample_text(spec))
    unjudged = {s.task_id for s in samples if spec.executes and s.verdict is None}
    scored = frozenset({s.task_id for s in samples} - unjudged)
    rows = {t: f"{path} sample {', '.join(map(str, sorted(numbers)))}" for t, (path, numbers) in located.items()}
    return Side(problems, samples, scored, rows)


def check_comparable(task: str, a: Sequence[Problem], b: Sequence[Problem]) -> None:
    """The same problems in the same order with the same prompts, or one line saying what differs."""
    ids_a, ids_b = [p.task_id for p in a], [p.task_id for p in b]
    if ids_a != ids_b:
        only_a = [t for t in ids_a if t not in set(ids_b)]
        only_b = [t for t in ids_b if t not in set(ids_a)]
        what = [f"{len(only_a)} only in A (first {only_a[0]})"] if only_a else []
        what += [f"{len(only_b)} only in B (first {only_b[0]})"] if only_b else []
        raise UsageError(f"{task}: the runs hold different problem sets ({len(ids_a)} problems in A, "
                         f"{len(ids_b)} in B; {', '.join(what) or 'the same ones in another order'}); "
                         "not comparable")
    differ = [p.task_id for p, q in zip(a, b) if p.prompt != q.prompt]
    if differ:
        raise UsageError(f"{task}: the prompts differ for {len(differ)} of {len(ids_a)} problems "
                         f"(first {differ[0]}); not comparable")


def headline(spec: TaskSpec, problems: Sequence[Problem], samples: Sequence[Sample],
             ks: Sequence[int]) -> tuple[Metric, str, float]:
    """(the metric computing the task's primary value, its key, the value). Metrics are computed
    in order until one gives the primary key: the others may need what a comparison lacks (a
    repo-level run's recall@k reads the project's files, which may be gone by now)."""
    computed: list[tuple[Metric, dict]] = []
    for m in spec.metrics:
        computed.append((m, m.compute(problems, samples, ks)))
        if spec.primary in computed[-1][1]:
            break
    key = primary_key(spec, {k: v for _, values in computed for k, v in values.items()})
    metric, values = next((m, values) for m, values in computed if key in values)
    return metric, key, float(values[key])


def passed_by_problem(values: Optional[dict[str, float]], samples: Sequence[Sample],
                      spec: TaskSpec) -> dict[str, bool]:
    """Each problem's pass/fail for the list of flips: its value when the metric's per-problem
    values are pass/fail (`values`), else whether any of its samples passed ({}: no such notion)."""
    if values is not None:
        return {t: v == 1.0 for t, v in values.items()}
    solved: dict[str, bool] = {}
    for s in samples if spec.executes else ():
        solved[s.task_id] = solved.get(s.task_id, False) or s.passed
    return solved


def compare_task(task: str, side_a: Side, side_b: Side) -> TaskComparison:
    """B against A on one task (check_comparable passed)."""
    spec = get_task(task)
    common = [p for p in side_a.problems if p.task_id in side_a.scored & side_b.scored]
    if not common:
        raise UsageError(f"{task}: no problem was scored by both runs")
    ids = {p.task_id for p in common}
    samples_a = [s for s in side_a.samples if s.task_id in ids]
    samples_b = [s for s in side_b.samples if s.task_id in ids]
    ks = [1] if spec.uses_k else []
    metric, key, a = headline(spec, common, samples_a, ks)
    _, key_b, b = headline(spec, common, samples_b, ks)
    if key_b != key:
        raise UsageError(f"{task}: the runs report different headline metrics ({key} in A, {key_b} in B: "
                         "different numbers of samples); not comparable")
    per_a = metric.per_problem(common, samples_a, ks).get(key)
    per_b = metric.per_problem(common, samples_b, ks).get(key)
    binary = per_a is not None and per_b is not None and set(per_a.values()) | set(per_b.values()) <= {0.0, 1.0}
    passed_a = passed_by_problem(per_a if binary else None, samples_a, spec)
    passed_b = passed_by_problem(per_b if binary else None, samples_b, spec)
    rule = f"its {key} is 1" if binary else "any of its samples passed" if spec.executes else ""
    order = [p.task_id for p in common]
    paired = [t for t in order if t in (per_a or {}) and t in (per_b or {})]
    d = np.array([per_b[t] - per_a[t] for t in paired])  # type: ignore[index]
    if binary:  # pass/fail per problem on both sides
        n_down = sum(per_a[t] > per_b[t] for t in paired)  # type: ignore[index]
        n_up = sum(per_a[t] < per_b[t] for t in paired)  # type: ignore[index]
        p_value, test = mcnemar_exact(n_down, n_up), MCNEMAR
        spread = uncertainty.mean_interval(d, bounds=(-1.0, 1.0))
        ci = spread[2] if spread else (-1.0, 1.0)
    else:
        if paired:  # a mean over problems: resample the per-problem differences
            replicates = d[uncertainty.draws(len(d), RESAMPLES)].mean(axis=1)
        else:  # recompute the metric on the same draws of problems for both runs
            replicates = np.array([
                float(metric.compute(*uncertainty.resample(common, samples_b, idx), ks)[key])
                - float(metric.compute(*uncertainty.resample(common, samples_a, idx), ks)[key])
                for idx in uncertainty.draws(len(common), RESAMPLES)])
        lo, hi = np.percentile(replicates, [2.5, 97.5])
        observed = float(d.mean()) if paired else b - a
        ci, p_value, test = (float(lo), float(hi)), bootstrap_p(replicates, observed), BOOTSTRAP
    flipped = [t for t in order if rule and t in passed_a and t in passed_b and passed_a[t] != passed_b[t]]
    where = [(t, side_a.rows.get(t, "?"), side_b.rows.get(t, "?")) for t in flipped]
    return TaskComparison(task, key, len(common), a, b, ci, p_value, test,
                          tuple(w for w in where if passed_a[w[0]]), tuple(w for w in where if not passed_a[w[0]]),
                          rule)


def run_tasks(root: Path) -> list[str]:
    if not root.is_dir():
        raise UsageError(f"no run at {root}")
    tasks = sorted(p.parent.name for p in root.glob("*/problems.parquet"))
    if not tasks:
        raise UsageError(f"no run at {root}: no <task>/problems.parquet in it")
    return tasks


def compare_runs(root_a: Path, root_b: Path) -> tuple[list[TaskComparison], list[str], list[str]]:
    """(the comparison of each task both runs hold, tasks only in A, tasks only in B)."""
    tasks_a, tasks_b = run_tasks(root_a), run_tasks(root_b)
    both = [t for t in tasks_a if t in tasks_b]
    if not both:
        raise UsageError(f"the runs share no task (A: {', '.join(tasks_a)}; B: {', '.join(tasks_b)})")
    sides = {t: (load_side(root_a, t, get_task(t)), load_side(root_b, t, get_task(t))) for t in both}
    for t, (a, b) in sides.items():  # every task checked before any is scored
        check_comparable(t, a.problems, b.problems)
    return ([compare_task(t, *sides[t]) for t in both], [t for t in tasks_a if t not in both],
            [t for t in tasks_b if t not in both])


def _label(root: Path) -> str:
    try:
        run = json.loads((root / "run.json").read_text(encoding="utf-8"))
        return f"{root} (model {run.get('model')}, run {run.get('run_id')})"
    except (OSError, ValueError):
        return str(root)


def report(root_a: Path, root_b: Path, shown: int = 50) -> str:
    """What `codeeval compare` prints."""
    comparisons, only_a, only_b = compare_runs(root_a, root_b)
    lines = [f"A: {_label(root_a)}", f"B: {_label(root_b)}"]
    for c in comparisons:
        lines.append(f"{c.task}: {c.metric} A {c.a:.4f}  B {c.b:.4f}  B-A {c.difference:+.4f}  95% interval "
                     f"[{c.ci95[0]:+.4f}, {c.ci95[1]:+.4f}]  p={c.p_value:.4g} ({c.test}, {c.problems} problems "
                     "scored by both)")
        if not c.flips:
            lines.append("  no pass/fail per problem: no flips listed")
            continue
        lines.append(f"  flipped (a problem passes when {c.flips}; where its rows are):")
        for name, flips in (("pass->fail", c.pass_to_fail), ("fail->pass", c.fail_to_pass)):
            lines.append(f"  {name}: {len(flips)} problems")
            lines += [f"    {t}: A {wa}; B {wb}" for t, wa, wb in flips[:shown]]
            if len(flips) > shown:
                lines.append(f"    ... and {len(flips) - shown} more")
    for which, tasks in (("A", only_a), ("B", only_b)):
        if tasks:
            lines.append(f"only in {which}, not compared: {', '.join(tasks)}")
    return "\n".join(lines) + "\n"
