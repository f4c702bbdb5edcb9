"""Run-queue delay: the seconds a program's threads spent runnable but waiting for a CPU
(/proc/<pid>/task/<tid>/schedstat, second field), which its clock leaves out.

gVisor's kernel keeps no schedstat; there every clock below reads the delay the Docker host
measured for the whole container, HOST_QUEUED (executors/docker/hostclocks.py), where it is
mounted: the programs run one at a time, so it is theirs (and an idle server's)."""
from __future__ import annotations

import os
import time
from typing import Callable, Optional

from .clocks import Clock, host_clock, members

HOST_QUEUED = "/run/codeeval-host/queued"  # hostclocks.MOUNT/QUEUED: mounted by the host under gVisor only


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


_HOST: dict[int, Optional[Clock]] = {}  # pid -> its clock on HOST_QUEUED (a forked child closes the fd)


def host_queued() -> Optional[Clock]:
    """The container's delay as the Docker host measured it, where this kernel keeps no schedstat
    and the host's file is mounted (gVisor on a local engine); None elsewhere. Opened once a
    process: the server asks for every program, a harness for every step."""
    pid = os.getpid()
    if pid not in _HOST:
        _HOST.clear()  # a parent's descriptor is not this process's
        _HOST[pid] = None if os.path.exists("/proc/self/schedstat") else host_clock(HOST_QUEUED)
    return _HOST[pid]


def since(clock: Clock) -> Clock:
    """`clock` counted from now."""
    base = clock()
    return lambda: clock() - base


def _queued(member: Callable[[int, list], bool]) -> Clock:
    """Each thread's delay is kept as last read, so a thread that has exited still counts with
    what it had waited then; the host's count from now where the kernel keeps no schedstat, else 0."""
    host = host_queued()
    if host is not None:
        return since(host)
    seen: dict[int, int] = {}

    def read() -> float:
        for pid, _ in members(member):
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
    threads), that one only (~3 us a reading; ~6 us listing the threads). Under gVisor, the
    host's count (host_queued)."""
    host = host_queued()
    if host is not None:
        return lambda: time.monotonic() - host()
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
