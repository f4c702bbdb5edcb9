"""The speed check: how much slower than the reference speed this machine runs Python right
now, by which a program's CPU limit is stretched (docs/reliability.md, slow-machine stretch)."""
from __future__ import annotations

import os
import signal
import time

# CPU seconds of `_speed_work` at the reference speed, the speed at which MBPP 123's canonical
# solution needs 1.8 s (its share of bigcode's 3 s limit on the machines the oracle was measured
# on; the two run in a steady ratio of ~200:1 whatever the host's speed). A limit is stretched
# by at most MAX_SLOWDOWN.
REFERENCE_S = 0.009
MAX_SLOWDOWN = 4.0


def _speed_work() -> int:
    """What benchmark programs spend their time on: loops, list comprehensions, arithmetic."""
    return sum(sum([d for d in range(1, n) if n % d == 0]) for n in range(2, 1000))


def slowdown(reference_s: float = REFERENCE_S) -> float:
    """How much slower than the reference this thread runs Python right now: the best of three
    timings of `_speed_work` in this thread's own CPU time, over `reference_s`, within
    [1, MAX_SLOWDOWN]. A faster machine keeps the reference's limits as they are."""
    best = float("inf")
    for _ in range(3):
        started = time.thread_time()
        _speed_work()
        best = min(best, time.thread_time() - started)
    return min(MAX_SLOWDOWN, max(1.0, best / reference_s))


def paused_slowdown(pgid: int, reference_s: float = REFERENCE_S) -> float:
    """`slowdown`, measured while the program's process group is stopped (it would compete
    for the same CPU quota)."""
    try:
        os.killpg(pgid, signal.SIGSTOP)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return slowdown(reference_s)
    finally:
        try:
            os.killpg(pgid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass
