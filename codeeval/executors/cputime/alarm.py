"""The reference's alarm inside a program, on the program's clock instead of the wall clock
(Alarm), and on its CPU time as well (TimeLimit)."""
from __future__ import annotations

import contextlib
import signal
from typing import Callable, Iterator, Optional

from .clocks import Clock
from .limits import MIN_POLL_S
from .queued import own_clock


class Alarm:
    """`signal.alarm` on the program's clock (`own_clock`), for a reference's ITIMER_REAL /
    alarm limits applied inside a program: `set(seconds)` arms it (0 cancels); once the clock
    has advanced that far, `expired()` is called in the main thread (it raises, as the
    reference's handler does). SIGALRM comes when the wall time has advanced that far, the
    earliest the clock can have, and is set again for what is left while the program had to
    wait for a CPU. Installs its SIGALRM handler."""

    def __init__(self, expired: Callable[[], None], clock: Optional[Clock] = None):
        self.expired = expired
        self.clock = clock or own_clock()
        self.deadline: Optional[float] = None
        signal.signal(signal.SIGALRM, self._on_alarm)

    def set(self, seconds: float, now: Optional[float] = None) -> None:
        """Arm for `seconds` of the clock from `now` (a reading of the clock, or read here)."""
        if seconds <= 0:
            self.deadline = None
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        self.deadline = (self.clock() if now is None else now) + seconds
        signal.setitimer(signal.ITIMER_REAL, seconds)

    def _on_alarm(self, signum, frame) -> None:
        if self.deadline is None:
            return
        left = self.deadline - self.clock()
        if left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(left, MIN_POLL_S))
            return
        self.deadline = None
        self.expired()


class TimeLimit:
    """A reference's per-test `signal.alarm` as the harnesses apply it (APPS, EvalPlus, ruHumanEval):
    on the program's clock (Alarm) and on its CPU time (ITIMER_PROF), so that neither a program
    that sleeps nor one that spins outlives it. `expired()` is called on whichever passes first.
    Installs the SIGPROF and SIGALRM handlers."""

    def __init__(self, expired: Callable[[], None], clock: Optional[Clock] = None):
        self.alarm = Alarm(expired, clock)
        signal.signal(signal.SIGPROF, lambda signum, frame: expired())

    def set(self, cpu_s: float, clock_s: Optional[float] = None, now: Optional[float] = None) -> None:
        """Arm both: `cpu_s` seconds of CPU time, `clock_s` (else `cpu_s`) of the clock from `now`
        (a reading of the clock, or read here). 0 cancels both."""
        if cpu_s <= 0:
            self.alarm.set(0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            return
        signal.setitimer(signal.ITIMER_PROF, cpu_s)
        self.alarm.set(cpu_s if clock_s is None else clock_s, now)

    @contextlib.contextmanager
    def running(self, cpu_s: float, clock_s: Optional[float] = None, now: Optional[float] = None) -> Iterator[None]:
        """`set` for the block, cancelled when it leaves, however it leaves."""
        self.set(cpu_s, clock_s, now)
        try:
            yield
        finally:
            self.set(0)
