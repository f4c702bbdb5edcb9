"""A program's two limits: the CPU time of its whole process tree, and its clock.

Why CPU time: a wall-clock limit judges the same program differently on a busy and an
idle machine (a program that needs 1.8 s of CPU times out at 3 s when it gets half a
core). CPU seconds do not depend on how many processes share the CPU, so the verdict does
not either (they still depend on the CPU's speed: docs/deviations.md, row 4).

Why a clock as well: the reference harnesses limit wall time, so a program that sleeps, blocks
on I/O or waits for a child times out there. A program's clock is its wall time less its
run-queue delay, the time its threads spent runnable but waiting for a CPU
(/proc/<pid>/task/<tid>/schedstat, second field): sleeping, blocking and waiting count, as in
the reference; waiting for a CPU does not, so the clock, like the CPU time, does not depend on
the machine's load. The reference's wall-clock seconds are applied to it.

Why the whole tree: a program whose main thread waits while a thread, a child or an
orphan burns CPU must reach the limit too.

Clocks (zero-argument callables returning cumulative seconds; a caller subtracts the
reading taken before the program started):
  * `cgroup_clock()` -- CPU: the counter of the cgroup this process is in (v1 cpuacct.usage,
    v2 cpu.stat usage_usec): every task in it, dead or alive, exact to the scheduler's
    accounting, one pread per reading. The Docker server uses it: the container's cgroup
    holds the server (idle while it waits) and the program's every thread, child and orphan.
  * `container_clock()` -- CPU: the cgroup clock, or where no cgroup file is readable, a sum
    over /proc of every other process plus what this process has reaped.
  * `group_clock(pgid)` -- CPU: a sum over /proc of a process group's members (the local
    sandbox, which shares its cgroup with the harness).
  * `others_queued()`, `group_queued(pgid)`, `session_queued(sid)` -- run-queue delay of
    the program's threads (the server's, the local sandbox's, a harness's child steps).
  * `own_clock()` -- inside a program: this process's wall time less its threads' run-queue
    delay, for the reference's limits that a harness applies inside the program (APPS's
    per-test alarm, EvalPlus's per-input limit, MERA's exec limit) through `Alarm`.

Standalone (stdlib only): the Docker image copies it beside the server, whose forked
programs find it imported (`import cputime`); the local sandbox's runner imports it for them.
"""
from __future__ import annotations

import os
import select
import signal
import time
from typing import Callable, Iterator, Optional

Clock = Callable[[], float]

# Outcomes of `watch`.
ENDED = "ended"  # `wait` said so: the program exited (or the caller must stop waiting)
CPU = "cpu"  # the program's CPU time passed its limit
CLOCK = "clock"  # the program's clock (wall time less run-queue delay) passed its limit
WALL = "wall"  # the wall-clock cap passed: the machine was too crowded for either limit

MIN_POLL_S = 0.005  # the shortest pause between two readings: bounds the polling near the limit
# How often the run-queue delay is read while a program runs: a thread or process that exits
# takes at most this much of its delay with it (what was read before stays counted).
POLL_S = 0.2

# The speed check (`slowdown`): CPU seconds of `_speed_work` at the reference speed, the speed
# at which MBPP 123's canonical solution needs 1.8 s (its share of bigcode's 3 s limit on the
# machines the oracle was measured on; the two run in a steady ratio of ~200:1 whatever the
# host's speed). A limit is stretched by at most MAX_SLOWDOWN.
REFERENCE_S = 0.009
MAX_SLOWDOWN = 4.0

_CGROUP_V1_CPUACCT = ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct")
_CGROUP_V1_CPU = ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct")
_CGROUP_V2 = "/sys/fs/cgroup"
_TICK = os.sysconf("SC_CLK_TCK")


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

    `stretch()`, asked once when the CPU first passes its limit (or the clock, if a slower
    machine could explain that), returns the machine's current slowdown against the reference
    speed (>= 1, see `slowdown`): the CPU limit grows by it and the clock counts CPU seconds at
    the reference speed (the CPU used, divided by it), so that a slow or shared host does not
    time out programs that fit the reference's limit; seconds spent sleeping are never stretched.
    The program is stopped while the check runs; that time does not count.

    `wall_cap` bounds what a host may wait for, whatever the load: it ends a program only when
    it waited for a CPU that long."""
    started = time.monotonic()
    cap = started + wall_cap
    cpu_at = started + cpu_limit / rate
    clock_at = started + clock_limit
    poll_at = started + POLL_S if queued is not None else float("inf")
    factor, paused, waited = 1.0, 0.0, 0.0

    def check_speed() -> None:
        nonlocal factor, paused
        before = time.monotonic()
        factor = stretch()
        paused += time.monotonic() - before

    def clock(at: float) -> float:
        nonlocal waited
        if queued is not None:
            waited = queued()
        scaled = used() * (1 - 1 / factor) if factor > 1 else 0.0
        return at - started - paused - waited - scaled

    def clock_over(at: float) -> float:
        """The clock at `at`, after a speed check if a slow machine could explain its excess: at
        the largest stretch its CPU seconds would leave a tenth of the limit or more (not for a
        program that slept: the check costs ~15 ms of CPU, paused)."""
        spent = clock(at)
        if spent >= clock_limit and stretch is not None and factor == 1.0:
            if spent - used() * (1 - 1 / MAX_SLOWDOWN) <= 0.9 * clock_limit:
                held = paused
                check_speed()
                spent = clock(at) + (paused - held)  # the check came after `at`
        return spent

    while True:
        now = time.monotonic()
        if now >= cpu_at:
            left = cpu_limit * factor - used()
            if left < 0 and stretch is not None and factor == 1.0:
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
            if stretch is not None and factor == 1.0 and used() > cpu_limit:
                held = paused
                check_speed()  # it ended past the limit between two readings: judged alike
                paused = held  # it had ended: the check stopped nothing
            if ended - started - paused > clock_limit and clock_over(ended) > clock_limit:
                return CLOCK, factor
            return ENDED, factor


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


def max_rate() -> float:
    """An upper bound of the CPU seconds per wall second this process and its children can
    use: the CPU quota of its own cgroup (docker --cpus) where one is set, else the number of
    CPUs it may run on."""
    cpus = float(len(os.sched_getaffinity(0)))
    quota = _cgroup_quota()
    return min(cpus, quota) if quota else cpus


def cgroup_clock() -> Optional[tuple[Clock, str]]:
    """A clock on the counter of this process's own cgroup and the counter's path, or None
    when none is readable (a directory counts only if its cgroup.procs lists this process:
    not a parent's or the host's counter)."""
    for directory in _CGROUP_V1_CPUACCT:
        path = os.path.join(directory, "cpuacct.usage")
        clock = _counter(path, directory, lambda text: int(text) / 1e9)
        if clock:
            return clock, path
    path = os.path.join(_CGROUP_V2, "cpu.stat")
    clock = _counter(path, _CGROUP_V2, _usage_usec)
    return (clock, path) if clock else None


def container_clock() -> tuple[Clock, str]:
    """The CPU of everything in this container, and where it is read from: the cgroup
    counter, else /proc (every other process, plus the children this process reaped)."""
    return cgroup_clock() or (_others_and_reaped, "/proc")


def group_clock(pgid: int) -> Clock:
    """The CPU of a process group's live and zombie members, with the children they reaped.
    A member reaped by a process outside the group (an orphan's by init) drops out of the
    sum, so the clock keeps the highest reading it has seen."""
    highest = 0.0

    def read() -> float:
        nonlocal highest
        highest = max(highest, _proc_sum(lambda pid, fields: int(fields[2]) == pgid))
        return highest

    return read


def group_queued(pgid: int) -> Clock:
    """Seconds the threads of a process group spent runnable but waiting for a CPU (the
    run-queue delay, /proc/<pid>/task/<tid>/schedstat's second field): the local sandbox."""
    return _queued(lambda pid, fields: int(fields[2]) == pgid)


def session_queued(sid: int) -> Clock:
    """`group_queued` for a session: a step a harness started in a session of its own (a
    compiler and every process it runs)."""
    return _queued(lambda pid, fields: int(fields[3]) == sid)


def others_queued() -> Clock:
    """`group_queued` for every process but this one: the Docker server, PID 1 of a container
    that holds only the program's tree (orphans that left its session included)."""
    own = os.getpid()
    return _queued(lambda pid, fields: pid != own)


def _queued(member: Callable[[int, list], bool]) -> Clock:
    """Each thread's delay is kept as last read, so a thread that has exited still counts with
    what it had waited then; 0 where the kernel keeps no schedstat."""
    seen: dict[int, int] = {}

    def read() -> float:
        for pid, _ in _members(member):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue  # gone meanwhile
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                        seen[int(tid)] = max(seen.get(int(tid), 0), int(fh.read().split()[1]))
                except (OSError, IndexError, ValueError):
                    continue  # gone meanwhile, or no schedstat
        return sum(seen.values()) / 1e9

    return read


def own_clock() -> Clock:
    """Inside a program: this process's wall time (time.monotonic) less the run-queue delay of its
    threads, cumulative (take differences). Each thread's schedstat stays open and is read with
    one pread; while the process has one thread (/proc/self/task's link count is 2 + the
    threads), that one only (~3 us a reading; ~6 us listing the threads)."""
    fds: dict[str, int] = {}
    seen: dict[str, int] = {}
    main = str(os.getpid())

    def read() -> float:
        now = time.monotonic()
        alone = main in fds and os.stat("/proc/self/task").st_nlink == 3
        for tid in (main,) if alone else os.listdir("/proc/self/task"):
            fd = fds.get(tid)
            if fd is None:
                try:
                    fd = fds[tid] = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    continue
            try:
                seen[tid] = int(os.pread(fd, 128, 0).split()[1])
            except (OSError, IndexError, ValueError):
                os.close(fds.pop(tid))
        return now - sum(seen.values()) / 1e9

    return read


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


def _usage_usec(text: str) -> float:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise ValueError("no usage_usec")


def _own_cgroup(directory: str) -> bool:
    try:
        with open(os.path.join(directory, "cgroup.procs")) as fh:
            return str(os.getpid()) in fh.read().split()
    except OSError:
        return False


def _counter(path: str, directory: str, parse: Callable[[str], float]) -> Optional[Clock]:
    if not _own_cgroup(directory):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None

    def read() -> float:
        return parse(os.pread(fd, 4096, 0).decode())

    try:
        read()
    except (OSError, ValueError):
        os.close(fd)
        return None
    return read


def _cgroup_quota() -> Optional[float]:
    """CPUs' worth of quota of this process's own cgroup (v1 cfs_quota/cfs_period, v2
    cpu.max), or None when unlimited or unknown."""
    for directory in _CGROUP_V1_CPU:
        if _own_cgroup(directory):
            try:
                with open(os.path.join(directory, "cpu.cfs_quota_us")) as q, \
                        open(os.path.join(directory, "cpu.cfs_period_us")) as p:
                    quota, period = int(q.read()), int(p.read())
            except (OSError, ValueError):
                continue
            return quota / period if quota > 0 and period > 0 else None
    if _own_cgroup(_CGROUP_V2):
        try:
            with open(os.path.join(_CGROUP_V2, "cpu.max")) as fh:
                quota, period = fh.read().split()
            return int(quota) / int(period) if quota != "max" else None
        except (OSError, ValueError):
            return None
    return None


def _members(member: Callable[[int, list], bool]) -> Iterator[tuple[int, list]]:
    """(pid, fields) of the processes in /proc that are members (fields: /proc/<pid>/stat
    after the command name; [2] is the process group); one that is gone meanwhile is left out."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if member(int(name), fields):
            yield int(name), fields


def _proc_sum(member: Callable[[int, list], bool]) -> float:
    """utime + stime + cutime + cstime, in seconds, of the member processes."""
    ticks = sum(int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]) for _, f in _members(member))
    return ticks / _TICK


def _others_and_reaped() -> float:
    own = os.getpid()
    reaped = os.times()
    return _proc_sum(lambda pid, fields: pid != own) + reaped.children_user + reaped.children_system
