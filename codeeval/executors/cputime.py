"""The per-program CPU-time limit: measure a program's whole process tree, stop it at its limit.

Why CPU time: a wall-clock limit judges the same program differently on a busy and an
idle machine (a program that needs 1.8 s of CPU times out at 3 s when it gets half a
core). CPU seconds do not depend on how many processes share the CPU, so the verdict does
not either (they still depend on the CPU's speed: docs/deviations.md, row 5); a wall-clock
backstop (base.wall_backstop) still ends programs that sleep or block.

Why the whole tree: a program whose main thread waits while a thread, a child or an
orphan burns CPU must reach the limit too, not run on until the backstop.

Clocks (zero-argument callables returning cumulative CPU seconds; a caller subtracts
the reading taken before the program started):
  * `cgroup_clock()` -- the counter of the cgroup this process is in (v1 cpuacct.usage,
    v2 cpu.stat usage_usec): every task in it, dead or alive, exact to the scheduler's
    accounting, one pread per reading. The Docker server uses it: the container's cgroup
    holds the server (idle while it waits) and the program's every thread, child and orphan.
  * `container_clock()` -- the cgroup clock, or where no cgroup file is readable, a sum
    over /proc of every other process plus what this process has reaped.
  * `group_clock(pgid)` -- a sum over /proc of a process group's members (the local
    sandbox, which shares its cgroup with the harness).

Standalone (stdlib only): the Docker image copies it beside the server.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Iterator, Optional

Clock = Callable[[], float]

# Outcomes of `watch`.
ENDED = "ended"  # `wait` said so: the program exited (or the caller must stop waiting)
CPU = "cpu"  # the program's CPU time passed its limit
WALL = "wall"  # the wall-clock backstop passed

MIN_POLL_S = 0.005  # the shortest pause between two readings: bounds the polling near the limit

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


def watch(wait: Callable[[float], bool], used: Clock, cpu_limit: float, wall_limit: float,
          rate: float, stretch: Optional[Callable[[], float]] = None,
          queued: Optional[Clock] = None) -> tuple[str, float]:
    """Wait until `wait` reports the end (ENDED), the CPU used passes `cpu_limit` (CPU) or
    `wall_limit` seconds pass (WALL); returns that and the factor the limits were stretched by.

    `wait(seconds)` blocks up to that long and returns True to end the watch. `used()` is the
    program's CPU seconds so far; `rate` an upper bound of the CPU seconds it can use per wall
    second (max_rate). No reading is needed until (limit - used) / rate seconds have passed:
    the CPU used cannot reach the limit sooner. So an idle or single-threaded program is
    read a handful of times, and a program burning CPU is stopped within MIN_POLL_S of its
    limit (plus the kernel's accounting tick).

    `stretch()`, asked once when the CPU first passes the limit, returns the machine's current
    slowdown against the reference speed (>= 1, see `slowdown`): both limits grow by it, so
    that a slow or shared host does not time out programs that fit the reference's limit.

    `queued()`, asked when the backstop is reached, returns the seconds the program spent
    runnable but waiting for a CPU (`group_queued`): the backstop moves on by that much, so that
    on a crowded machine a program that computes reaches its CPU limit instead of the backstop,
    while one that sleeps or blocks (it queues for nothing) still ends at the backstop. Either
    way the wall time stays under `wall_limit * MAX_SLOWDOWN` (what a host may wait for)."""
    started = time.monotonic()
    backstop = started + wall_limit
    check_at = started + cpu_limit / rate
    factor = 1.0
    while True:
        now = time.monotonic()
        if now >= check_at:
            left = cpu_limit * factor - used()
            if left < 0 and stretch is not None and factor == 1.0:
                factor = stretch()
                backstop = started + wall_limit * factor
                left = cpu_limit * factor - used()
            if left < 0:
                return CPU, factor
            check_at = now + max(left / rate, MIN_POLL_S)
        if now >= backstop and queued is not None:
            backstop = started + min(wall_limit * MAX_SLOWDOWN, wall_limit * factor + queued())
        if now >= backstop:
            return WALL, factor
        if wait(min(check_at, backstop) - now):
            if stretch is not None and factor == 1.0 and used() > cpu_limit:
                factor = stretch()  # it ended past the limit between two readings: judged alike
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
    import signal

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
    """Seconds the live threads of a process group spent runnable but waiting for a CPU (the
    run-queue delay, /proc/<pid>/task/<tid>/schedstat's second field): the local sandbox."""
    return _queued(lambda pid, fields: int(fields[2]) == pgid)


def others_queued() -> Clock:
    """`group_queued` for every process but this one: the Docker server, PID 1 of a container
    that holds only the program's tree (orphans that left its session included)."""
    own = os.getpid()
    return _queued(lambda pid, fields: pid != own)


def _queued(member: Callable[[int, list], bool]) -> Clock:
    """A thread that has exited drops out of the sum, so the clock keeps the highest reading
    it has seen; 0 where the kernel keeps no schedstat."""
    highest = 0.0

    def read() -> float:
        nonlocal highest
        waited = 0
        for pid, _ in _members(member):
            try:
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                        waited += int(fh.read().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile, or no schedstat
        highest = max(highest, waited / 1e9)
        return highest

    return read


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
