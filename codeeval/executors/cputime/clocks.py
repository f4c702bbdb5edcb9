"""The CPU seconds of a program's whole tree, read from its cgroup's counter or summed over
/proc, and the most CPU seconds per wall second it can use (its cgroup's quota)."""
from __future__ import annotations

import os
from typing import Callable, Iterator, Optional

Clock = Callable[[], float]

_CGROUP_V1_CPUACCT = ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct")
_CGROUP_V1_CPU = ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct")
_CGROUP_V2 = "/sys/fs/cgroup"
_TICK = os.sysconf("SC_CLK_TCK")


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


def members(member: Callable[[int, list], bool]) -> Iterator[tuple[int, list]]:
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
    return pread_clock(path, parse) if _own_cgroup(directory) else None


def pread_clock(path: str, parse: Callable[[str], float]) -> Optional[Clock]:
    """A clock on the counter in the file `path` (kept open, one pread a reading, its text
    `parse`d), or None when it cannot be opened or read."""
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


def host_clock(path: str) -> Optional[Callable[[], Optional[float]]]:
    """A count the Docker host measures for a gVisor container, whose kernel cannot (its /proc has
    no schedstat, and its CPU time counts the waits for the host's CPU): nanoseconds written at
    offset 0 of `path` (executors/docker/hostclocks.py), in seconds; None for a negative count
    (none measured yet). None without the file."""
    return pread_clock(path, lambda text: int(text) / 1e9 if int(text) >= 0 else None)


def least_since(clock: Clock, bound: Optional[Callable[[], Optional[float]]]) -> Clock:
    """`clock` counted from now, never more than `bound`, a second count of the same work that
    cannot be inflated the same way, counted from now too; a `bound` that read None at the
    start (or reads None later) bounds nothing."""
    base = clock()
    start = bound() if bound is not None else None

    def read() -> float:
        spent = clock() - base
        limit = bound() if start is not None else None
        return spent if limit is None else min(spent, limit - start)

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


def _proc_sum(member: Callable[[int, list], bool]) -> float:
    """utime + stime + cutime + cstime, in seconds, of the member processes."""
    ticks = sum(int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]) for _, f in members(member))
    return ticks / _TICK


def _others_and_reaped() -> float:
    own = os.getpid()
    reaped = os.times()
    return _proc_sum(lambda pid, fields: pid != own) + reaped.children_user + reaped.children_system
