"""A program's clock (codeeval/executors/cputime/): its wall time less the time its threads spent
waiting for a CPU. `watch` on simulated programs (a fake time, so every case is exact and
instant), then the in-program alarm and the clocked wait of a harness's step on real processes,
on a CPU crowded by this test's own spinners."""
from __future__ import annotations

import math
import subprocess
import sys
import time

import pytest
from docker_env import one_crowded_cpu

from codeeval.executors import cputime
from codeeval.executors.cputime import CLOCK, CPU, ENDED, WALL


class Simulated:
    """A program as `watch` sees it: CPU seconds and run-queue delay as functions of the time
    since its start, and the time it ends; `wait` moves the fake time on."""

    def __init__(self, cpu=lambda t: 0.0, queued=lambda t: 0.0, ends=math.inf, slowdown=1.0):
        self.now, self.cpu, self.queued_at, self.ends, self.slowdown = 0.0, cpu, queued, ends, slowdown
        self.speed_checks = self.waits = 0

    def wait(self, seconds: float) -> bool:
        self.waits += 1
        assert self.waits < 100_000, "the watch never ended"
        self.now = min(self.now + max(seconds, 0.0), self.ends)
        return self.now >= self.ends

    def stretch(self) -> float:
        """The slowdown, or the next of a sequence of readings (the last one repeats)."""
        self.speed_checks += 1
        if isinstance(self.slowdown, tuple):
            return self.slowdown[min(self.speed_checks, len(self.slowdown)) - 1]
        return self.slowdown

    def watch(self, monkeypatch, cpu_limit, clock_limit, wall_cap=60.0, queued=True):
        monkeypatch.setattr(time, "monotonic", lambda: self.now)  # the watch's clock
        why, factor = cputime.watch(self.wait, lambda: self.cpu(self.now), cpu_limit, clock_limit, wall_cap, 1.0,
                                    stretch=self.stretch,
                                    queued=(lambda: self.queued_at(self.now)) if queued else None)
        return why, factor, self.now


def at(seconds: float):
    """A time as `watch` reaches it: within its shortest pause between two readings."""
    return pytest.approx(seconds, abs=2 * cputime.MIN_POLL_S)


def test_a_sleeper_stops_when_its_clock_reaches_the_limit(monkeypatch):
    program = Simulated()
    assert program.watch(monkeypatch, 3.0, 3.0) == (CLOCK, 1.0, at(3.0))
    assert program.speed_checks == 0  # its CPU could not explain it: no speed check


def test_time_spent_waiting_for_a_cpu_does_not_count(monkeypatch):
    """A loop that gets a quarter of a CPU: 1 s of CPU takes 4 s; its clock passes 1 s at 4 s."""
    crowded = dict(cpu=lambda t: t / 4, queued=lambda t: 3 * t / 4)
    assert Simulated(**crowded).watch(monkeypatch, 1.0, 2.0) == (CPU, 1.0, at(4.0))
    # the same program judged on wall time would have timed out at 2 s, with half its CPU
    assert Simulated(**crowded).watch(monkeypatch, 1.0, 2.0, queued=False) == (CLOCK, 1.0, at(2.0))
    # sleeping counts: 0.6 s asleep at the start, then the crowded loop
    mixed = Simulated(cpu=lambda t: max(0.0, t - 0.6) / 4, queued=lambda t: 3 * max(0.0, t - 0.6) / 4)
    assert mixed.watch(monkeypatch, 1.0, 1.0) == (CLOCK, 1.0, at(2.2))


def test_a_program_that_ends_before_its_limits_ended(monkeypatch):
    program = Simulated(cpu=lambda t: t / 2, queued=lambda t: t / 2, ends=5.9)
    assert program.watch(monkeypatch, 3.0, 3.0) == (ENDED, 1.0, at(5.9))


def test_a_slow_machine_stretches_the_cpu_seconds_of_the_clock_not_the_sleep(monkeypatch):
    # a loop on a machine 4x slower than the reference: the CPU limit grows to 4 s
    assert Simulated(cpu=lambda t: t, slowdown=4.0).watch(monkeypatch, 1.0, 2.0) == (CPU, 4.0, at(4.0))
    # its clock counts its CPU at the reference speed: 0.1 s asleep, then 3.6 s of CPU (0.9 s there)
    loop = Simulated(cpu=lambda t: max(0.0, t - 0.1), slowdown=4.0)
    assert loop.watch(monkeypatch, 1.0, 1.0) == (CLOCK, 4.0, at(3.7))
    # 0.5 s asleep, then 0.9 s of CPU on a machine 2x slower (0.45 s there): 0.95 s fit 1 s
    mixed = Simulated(cpu=lambda t: max(0.0, t - 0.5), slowdown=2.0, ends=1.4)
    assert mixed.watch(monkeypatch, 1.0, 1.0) == (ENDED, 2.0, at(1.4))
    assert mixed.speed_checks == 1
    # a sleeper is not stretched, and costs no speed check
    sleeper = Simulated(cpu=lambda t: 0.001 * t, slowdown=4.0)
    assert sleeper.watch(monkeypatch, 1.0, 1.0) == (CLOCK, 1.0, at(1.0))
    assert sleeper.speed_checks == 0


def test_a_second_speed_reading_before_the_clock_ends_a_stretched_program(monkeypatch):
    """MBPP 123 as a CI run saw it: a quarter of a CPU, 4.14 s of CPU in 18.8 s, and a first speed reading (1.8)
    under the slowdown its run saw: the clock would pass 3 s at 16.5 s. The second reading (2.4) counts its CPU
    at the reference speed it ran at, 1.73 s, and it ends within its limit; a second reading no larger changes
    nothing, and a loop stops at its CPU limit stretched by the first."""
    def ci(slowdown):
        return Simulated(cpu=lambda t: t / 4.54, queued=lambda t: 0.72 * t, ends=18.8, slowdown=slowdown)

    program = ci((1.8, 2.4))
    assert program.watch(monkeypatch, 3.0, 3.0) == (ENDED, 2.4, at(18.8)) and program.speed_checks == 2
    program = ci((1.8, 1.8))
    assert program.watch(monkeypatch, 3.0, 3.0) == (CLOCK, 1.8, at(16.48)) and program.speed_checks == 2
    loop = Simulated(cpu=lambda t: t, slowdown=(2.0, 3.0))
    assert loop.watch(monkeypatch, 1.0, 1.5) == (CPU, 2.0, at(2.0)) and loop.speed_checks == 1


def test_the_wall_cap_ends_a_program_the_machine_starves(monkeypatch):
    starved = Simulated(cpu=lambda t: t / 100, queued=lambda t: 0.99 * t)
    assert starved.watch(monkeypatch, 3.0, 3.0, wall_cap=56.0) == (WALL, 1.0, at(56.0))


def test_the_wall_cap_of_a_program_covers_both_limits_and_the_stretch():
    from codeeval.executors.base import Program, wall_cap

    assert wall_cap(3.0) == 56.0
    assert Program("p", "", timeout_s=3.0).wall_cap_s == 56.0
    assert Program("p", "", timeout_s=3.0, clock_s=4.0).wall_cap_s == wall_cap(4.0)
    assert Program("p", "", timeout_s=3.0, wall_s=9.0).wall_cap_s == 9.0
    assert Program("p", "", timeout_s=3.0).clock_limit_s == 3.0


# -- real processes ------------------------------------------------------------------------------

ALARMED = """
import sys, time
from codeeval.executors import cputime

class Expired(Exception):
    pass

def expired():
    raise Expired()

limit, cpu_s = float(sys.argv[1]), float(sys.argv[2])
alarm = cputime.Alarm(expired)
started = time.monotonic()
alarm.set(limit)
try:
    if cpu_s:
        spent = time.thread_time()
        while time.thread_time() - spent < cpu_s:
            pass
    else:
        time.sleep(5)
    fired = False
except Expired:
    fired = True
alarm.set(0)
print(fired, time.monotonic() - started)
"""


def alarmed(limit: float, cpu_s: float) -> tuple[bool, float]:
    """A program of its own (the alarm lives in one, and no thread of this test process can
    hold the GIL meanwhile) that arms `limit` and sleeps, or computes `cpu_s` seconds: whether
    the alarm fired, and the wall time."""
    out = subprocess.run([sys.executable, "-c", ALARMED, str(limit), str(cpu_s)],
                         capture_output=True, text=True, check=True).stdout.split()
    return out[0] == "True", float(out[1])


def test_the_in_program_alarm_fires_on_sleep_not_on_cpu_waits():
    """cputime.Alarm, the reference's ITIMER_REAL on the clock: a sleep reaches it at its
    seconds; 0.3 s of computing on a quarter of a CPU (~1.2 s of wall time) does not reach 0.8 s
    (CI once saw it reached when the alarm ran in pytest's own process, 0.4 s on a third)."""
    fired, wall = alarmed(0.5, 0)
    assert fired and 0.5 <= wall < 0.7, wall
    with one_crowded_cpu(spinners=3):
        fired, wall = alarmed(0.8, 0.3)
    assert not fired and wall > 0.8, ("the CPU was not crowded" if not fired else "the alarm fired", wall)


def test_a_step_is_clocked_by_its_session():
    """cputime.wait_clocked, a harness's step (MultiPL-E's compile and run, a DS-1000 case):
    a sleep past the limit is stopped at it; a computation that waits for a crowded CPU is not."""
    def step(code: str, limit: float):
        proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        started = time.monotonic()
        ended, clock = cputime.wait_clocked(proc.pid, limit)
        wall = time.monotonic() - started
        proc.kill()
        proc.wait()
        return ended, clock, wall

    ended, clock, wall = step("import time; time.sleep(5)", 0.6)
    assert not ended and 0.6 <= clock < 0.8 and wall < 1.0
    ended, clock, wall = step("import time; time.sleep(0.2)", 0.6)
    assert ended and clock < 0.6
    # a child that computes 0.5 s on a third of a CPU (its interpreter's start included); the
    # spinners are in sessions of their own as the step is (CI once saw 0.99995 s of wall time
    # when they were not: the step had half of the CPU)
    spinner = "import time\nt = time.thread_time()\nwhile time.thread_time() - t < 0.5: pass"
    with one_crowded_cpu(sessions=True):
        ended, clock, wall = step(spinner, 1.0)
    assert ended and wall > 1.0 and clock < 1.0, (clock, wall)
