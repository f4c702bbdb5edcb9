"""The watch that ends a program at its limits (its tree's CPU time, its clock, the wall-clock
cap), and a harness's step waited for on its session's clock."""
from __future__ import annotations

import os
import select
import time
from typing import Callable, Optional

from .clocks import Clock
from .queued import session_queued
from .speed import MAX_SLOWDOWN

# Outcomes of `watch`.
ENDED = "ended"  # `wait` said so: the program exited (or the caller must stop waiting)
CPU = "cpu"  # the program's CPU time passed its limit
CLOCK = "clock"  # the program's clock (wall time less run-queue delay) passed its limit
WALL = "wall"  # the wall-clock cap passed: the machine was too crowded for either limit

MIN_POLL_S = 0.005  # the shortest pause between two readings: bounds the polling near the limit
# How often the run-queue delay is read while a program runs: a thread or process that exits
# takes at most this much of its delay with it (what was read before stays counted).
POLL_S = 0.2


def watch(wait: Callable[[float], bool], used: Clock, cpu_limit: float, clock_limit: float, wall_cap: float,
          rate: float, stretch: Optional[Callable[[], float]] = None,
          queued: Optional[Clock] = None) -> tuple[str, float]:
    """Wait until `wait` reports the end (ENDED), the CPU used passes `cpu_limit` (CPU), the
    program's clock passes `clock_limit` (CLOCK) or `wall_cap` seconds of wall time pass (WALL);
    returns that and the factor the CPU was stretched by.

    `wait(seconds)` blocks up to that long and returns True to end the watch; the program must
    not be reaped before the watch returns (its last run-queue delay is read then). `used()` is
    the program's CPU seconds so far; `rate` an upper bound of the CPU seconds it can use per
    wall second (max_rate). No reading is needed until (limit - used) / rate seconds have
    passed: the CPU used cannot reach the limit sooner. So an idle or single-threaded program
    is read a handful of times, and a program burning CPU is stopped within MIN_POLL_S of its
    limit (plus the kernel's accounting tick).

    The clock is the wall time since the start less `queued()`, the seconds the program's
    threads spent runnable but waiting for a CPU (read every POLL_S, so that the delay of a
    thread that exits stays counted; without `queued`, the wall time). It cannot pass its limit
    before the wall time does, so a program that ends sooner costs no reading of it.

    `stretch()`, asked when the CPU first passes its limit (or the clock, if a slower machine
    could explain that), returns the machine's current slowdown against the reference speed
    (>= 1, see `slowdown`): the CPU limit grows by it and the clock counts CPU seconds at the
    reference speed (the CPU used, divided by it), so that a slow or shared host does not time
    out programs that fit the reference's limit; seconds spent sleeping are never stretched.
    It is asked a second time before the clock ends a program an earlier reading stretched while
    its CPU is still well within the stretched limit, and the larger reading counts: on a
    crowded host one reading can come out well under the slowdown the program saw over its run
    (CI: 1.80 for MBPP 123 at 2.4x its reference CPU).
    The program is stopped while the check runs; that time does not count.

    `wall_cap` bounds what a host may wait for, whatever the load: it ends a program only when
    it waited for a CPU that long."""
    started = time.monotonic()
    cap = started + wall_cap
    cpu_at = started + cpu_limit / rate
    clock_at = started + clock_limit
    poll_at = started + POLL_S if queued is not None else float("inf")
    factor, paused, waited, checks = 1.0, 0.0, 0.0, 0

    def check_speed() -> None:
        nonlocal factor, paused, checks
        before = time.monotonic()
        factor = max(factor, stretch())
        checks += 1
        paused += time.monotonic() - before

    def clock(at: float) -> float:
        nonlocal waited
        if queued is not None:
            waited = queued()
        scaled = used() * (1 - 1 / factor) if factor > 1 else 0.0
        return at - started - paused - waited - scaled

    def clock_over(at: float) -> float:
        """The clock at `at`, after a speed check (the first or the second) if a slower machine
        could explain its excess: at the largest stretch its CPU seconds would leave a tenth of
        the limit or more (not for a program that slept: the check costs ~15 ms of CPU, paused)."""
        spent = clock(at)
        if spent >= clock_limit and stretch is not None and checks < 2:
            cpu = used()
            again = checks == 0 or cpu < 0.9 * cpu_limit * factor  # not for a loop at its stretched CPU limit
            if again and spent - cpu * (1 / factor - 1 / MAX_SLOWDOWN) <= 0.9 * clock_limit:
                held = paused
                check_speed()
                spent = clock(at) + (paused - held)  # the check came after `at`
        return spent

    while True:
        now = time.monotonic()
        if now >= cpu_at:
            left = cpu_limit * factor - used()
            if left < 0 and stretch is not None and checks == 0:
                check_speed()
                left = cpu_limit * factor - used()
            if left < 0:
                return CPU, factor
            cpu_at = now + max(left / rate, MIN_POLL_S)
        if now >= poll_at:
            waited = queued()
            poll_at = now + POLL_S
        if now >= clock_at:
            spent = clock_over(now)
            if spent >= clock_limit:
                return CLOCK, factor
            clock_at = time.monotonic() + max(clock_limit - spent, MIN_POLL_S)
        if now >= cap:
            return WALL, factor
        if wait(min(cpu_at, clock_at, poll_at, cap) - now):
            ended = time.monotonic()
            if stretch is not None and checks == 0 and used() > cpu_limit:
                held = paused
                check_speed()  # it ended past the limit between two readings: judged alike
                paused = held  # it had ended: the check stopped nothing
            if ended - started - paused > clock_limit and clock_over(ended) > clock_limit:
                return CLOCK, factor
            return ENDED, factor


def wait_clocked(pid: int, limit: float) -> tuple[bool, float]:
    """Wait for child `pid`, the leader of a session of its own (a harness's step: a compiler, a
    test case), until it exits or its session's clock passes `limit` (the reference's
    `subprocess` timeout, on the clock); it is not reaped. Returns (True if it exited within
    the limit, the clock's seconds)."""
    queued = session_queued(pid)
    started = time.monotonic()
    try:
        pidfd: Optional[int] = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None

    def exited(seconds: float) -> bool:
        if pidfd is not None:
            return bool(select.select([pidfd], [], [], max(seconds, 0.0))[0])
        deadline = time.monotonic() + seconds
        while not os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    check_at = started + limit
    try:
        while True:
            now = time.monotonic()
            if exited(min(check_at, now + POLL_S) - now):
                spent = time.monotonic() - started
                if spent > limit:
                    spent -= queued()
                return spent <= limit, spent
            waited = queued()
            now = time.monotonic()
            spent = now - started - waited
            if spent >= limit:
                return False, spent
            check_at = now + max(limit - spent, MIN_POLL_S)
    finally:
        if pidfd is not None:
            os.close(pidfd)
