"""Standard errors and 95% intervals of a task's scores, over its problems (docs/statistics.md).

A score is a statistic of a draw of problems; its uncertainty is how far it would move on another
draw of problems like these (lm-evaluation-harness's stderr, over documents). Per value:

* closed form, for a mean over problems of a per-problem number (`Metric.per_problem`: pass@k
  with the unbiased estimator per problem, an accuracy, a sentence BLEU): SE = the sample
  standard deviation of the per-problem numbers / sqrt(P), the interval mean +- 1.96 SE (cut to
  [0, 1] when every per-problem number lies there);
* bootstrap, for any other float (corpus BLEU, macro P/R/F1, APPS accuracy, ...): the metric
  recomputed on RESAMPLES draws of P problems with replacement (seed SEED: the same samples give
  the same numbers), a problem drawn twice relabelled so that grouping by task id keeps its
  copies apart; SE = the replicates' standard deviation, the interval their 2.5/97.5 percentiles.

Fewer than two problems: no standard error. Counts (ints) and lists get none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Sequence

import numpy as np

from codeeval.benchmarks.spec import Metric, Problem, Sample

Z95 = 1.959963984540054  # the normal distribution's 97.5th percentile
RESAMPLES = 200  # bootstrap draws: the score stage stays at 200 metric computations at most
SEED = 0
CLOSED_FORM = "closed form over problems"
BOOTSTRAP = f"bootstrap over problems ({RESAMPLES} resamples)"


@dataclass(frozen=True)
class Spread:
    """Per value key: its standard error, 95% interval and how they were computed."""

    stderr: dict[str, float] = field(default_factory=dict)
    ci95: dict[str, list[float]] = field(default_factory=dict)
    method: dict[str, str] = field(default_factory=dict)

    def add(self, key: str, se: float, interval: tuple[float, float], method: str) -> None:
        self.stderr[key], self.ci95[key], self.method[key] = float(se), [float(interval[0]), float(interval[1])], method


def mean_interval(values: Sequence[float], bounds: Optional[tuple[float, float]] = None
                  ) -> Optional[tuple[float, float, tuple[float, float]]]:
    """(mean, SE, 95% interval) of a mean over problems; None below two values. `bounds` cuts
    the interval (None: [0, 1] when every value lies there, else no cut)."""
    v = np.asarray(values, dtype=float)
    if v.size < 2:
        return None
    mean, se = float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size))
    if bounds is None and v.min() >= 0.0 and v.max() <= 1.0:
        bounds = (0.0, 1.0)
    lo, hi = mean - Z95 * se, mean + Z95 * se
    if bounds is not None:
        lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
    return mean, se, (lo, hi)


def percentile_interval(replicates: Sequence[float]) -> tuple[float, float, tuple[float, float]]:
    """(SE, 95% interval, mean) of bootstrap replicates: their std and 2.5/97.5 percentiles."""
    r = np.asarray(replicates, dtype=float)
    lo, hi = np.percentile(r, [2.5, 97.5])
    return float(r.std(ddof=1)), (float(lo), float(hi)), float(r.mean())


def draws(n: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """`resamples` rows of n problem indices drawn with replacement, the same for the same n."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def resample(problems: Sequence[Problem], samples: Sequence[Sample],
             indices: Sequence[int]) -> tuple[list[Problem], list[Sample]]:
    """The problems at `indices` (repeats allowed) with their samples, each copy under a task id
    of its own (`<task_id>#<position>`), in the order compute() expects."""
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        groups.setdefault(s.task_id, []).append(s)
    out_problems, out_samples = [], []
    for position, i in enumerate(indices):
        problem = problems[int(i)]
        label = f"{problem.task_id}#{position}"
        out_problems.append(replace(problem, task_id=label, index=position))
        out_samples += [replace(s, task_id=label) for s in groups.get(problem.task_id, ())]
    return out_problems, out_samples


def bootstrap(metric: Metric, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int],
              keys: Sequence[str], resamples: int = RESAMPLES) -> dict[str, list[Any]]:
    """Each key's value recomputed by `metric` on each resample of the problems."""
    replicates: dict[str, list[Any]] = {k: [] for k in keys}
    for indices in draws(len(problems), resamples):
        values = metric.compute(*resample(problems, samples, indices), ks)
        for key in keys:
            replicates[key].append(values.get(key))
    return replicates


def scalar_keys(values: dict[str, Any]) -> list[str]:
    """The keys that are scores (floats), not counts, flags or lists."""
    return [k for k, v in values.items() if isinstance(v, float) and math.isfinite(v)]


def spread(metrics: Sequence[Metric], problems: Sequence[Problem], samples: Sequence[Sample],
           ks: Sequence[int], computed: Sequence[dict[str, Any]]) -> Spread:
    """The spread of every float each metric computed (`computed[i]` is `metrics[i]`'s result)."""
    out = Spread()
    if len(problems) < 2:
        return out
    for metric, values in zip(metrics, computed):
        keys = [k for k in scalar_keys(values) if k not in out.stderr]
        per_problem = metric.per_problem(problems, samples, ks)
        for key in [k for k in keys if k in per_problem]:
            if (result := mean_interval(list(per_problem[key].values()))) is not None:
                out.add(key, result[1], result[2], CLOSED_FORM)
        rest = [k for k in keys if k not in per_problem]
        if rest:
            for key, replicates in bootstrap(metric, problems, samples, ks, rest).items():
                if all(isinstance(r, (int, float)) and math.isfinite(r) for r in replicates):
                    se, interval, _ = percentile_interval(replicates)
                    out.add(key, se, interval, BOOTSTRAP)
    return out
