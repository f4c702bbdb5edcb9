"""The reference's alarm inside a program, on the program's clock instead of the wall clock."""
from __future__ import annotations

import signal
from typing import Callable, Optional

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
