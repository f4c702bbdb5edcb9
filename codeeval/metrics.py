"""pass@k: the unbiased estimator, and which ks a run reports."""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Optional, Sequence

import numpy as np

from codeeval.errors import UsageError


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


def score(task_ids: Iterable[str], passed: Iterable[bool], ks: Sequence[int]) -> dict[str, float]:
    """Mean pass@k over problems, from one row per sample."""
    n: Counter = Counter()
    c: Counter = Counter()
    for task_id, ok in zip(task_ids, passed):
        n[task_id] += 1
        c[task_id] += bool(ok)
    if not n:
        return {f"pass@{k}": 0.0 for k in ks}
    return {f"pass@{k}": float(np.mean([pass_at_k(n[t], c[t], k) for t in n])) for k in ks}
