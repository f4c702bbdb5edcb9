"""The run-queue delay and the CPU time of a gVisor container, measured on the host and handed to
its server.

A program's clock is its wall time less the time it waited for a CPU (cputime.limits), and its
CPU time what it ran. Under runc the server reads both in its own kernel: the programs'
schedstat and the container's cgroup. gVisor's /proc has no schedstat, and its kernel counts a
wait for the host's CPU as running, so on a crowded host both of its counts grow with the load.
The host sees the truth: the container's host tasks (the Sentry, its ptrace stubs, which run the
program) are its host cgroup's tasks. A `HostClocks` per container, in a thread every PERIOD_S:
  * sums their /proc/<tid>/schedstat second field (each task's last reading kept once it exits)
    into the file `queued`: the delay the server takes off the clock;
  * copies the cgroup's CPU counter (v1 cpuacct.usage, v2 cpu.stat usage_usec) into the file
    `cpu`: the program's CPU time plus gVisor's own work for it, never the waits. The server
    counts the lesser of this and gVisor's count (cputime.least_since), so an idle host's
    verdicts are gVisor's as before and a crowded host's no longer grow with the waits.
Each file holds nanoseconds (`cpu` -1 until the first count), fixed-width at offset 0, in a
private directory that the container mounts read-only at MOUNT; the server reads them with pread
(inside/server.py, cputime.host_clock). gVisor rereads such a file's contents at every pread
(runsc 20221219; tests/test_gvisor.py, "crowded").

Under runc nothing of this is made: the server's own readings are exact and free.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Callable, Optional

MOUNT = "/run/codeeval-host"  # where the container sees the directory
QUEUED, CPU = "queued", "cpu"  # cputime.HOST_QUEUED and inside/server.py's HOST_CPU are MOUNT/these
PERIOD_S = 0.05  # how stale the server's reading may be (it reads the clock every 0.2 s); ~13 ms of host CPU a second
_WIDTH = 20
_CGROUP_V1 = ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu")


def _cgroups(pid: int) -> list[tuple[set, str]]:
    """(controllers, path) of each hierarchy in /proc/<pid>/cgroup; empty when unreadable."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            lines = [line.rstrip("\n").split(":", 2) for line in fh]
    except OSError:
        return []
    return [(set(controllers.split(",")) - {""}, path) for _, controllers, path in (ln for ln in lines if len(ln) == 3)]


def tasks_file(pid: int) -> Optional[str]:
    """The file listing the host tasks of `pid`'s cgroup (v1 `tasks` of its cpuacct hierarchy,
    v2 `cgroup.threads`), whichever driver named it; None when unreadable."""
    candidates = []
    for controllers, path in _cgroups(pid):
        if not controllers:
            candidates.append(f"/sys/fs/cgroup{path}/cgroup.threads")
        elif {"cpuacct", "cpu"} & controllers:
            candidates += [f"{root}{path}/tasks" for root in _CGROUP_V1]
    return next((c for c in candidates if os.path.exists(c)), None)


def cpu_file(pid: int) -> Optional[tuple[str, Callable[[bytes], int]]]:
    """The CPU counter of `pid`'s cgroup and how to read nanoseconds from it (v1 cpuacct.usage,
    v2 cpu.stat's usage_usec); None when unreadable."""
    candidates: list[tuple[str, Callable[[bytes], int]]] = []
    for controllers, path in _cgroups(pid):
        if not controllers:
            candidates.append((f"/sys/fs/cgroup{path}/cpu.stat", _usage_ns))
        elif "cpuacct" in controllers:
            candidates += [(f"{root}{path}/cpuacct.usage", int) for root in _CGROUP_V1[:2]]
    return next((c for c in candidates if os.path.exists(c[0])), None)


def _usage_ns(text: bytes) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(b" ")
        if key == b"usage_usec":
            return int(value) * 1000
    raise ValueError("no usage_usec")


class HostClocks:
    """One container's host-side run-queue delay and CPU time, written while `follow` runs."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="codeeval-host-")
        os.chmod(self.dir, 0o755)  # the server reads it as gVisor's root, the program may too: no secret
        self.queued_path, self.cpu_path = (os.path.join(self.dir, name) for name in (QUEUED, CPU))
        self._fds = [os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                     for path in (self.queued_path, self.cpu_path)]
        self._write(0, -1)  # -1: no CPU count yet, which the server's reading takes as none
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def flags(self) -> list[str]:
        return ["-v", f"{self.dir}:{MOUNT}:ro"]

    def follow(self, pid: int, name: str = "") -> bool:
        """Start measuring the cgroup of the container's host process `pid`; False (no delay, no
        CPU count: the server counts gVisor's CPU time alone) when its cgroup cannot be read."""
        tasks, cpu = tasks_file(pid), cpu_file(pid)
        if tasks is None or cpu is None:
            return False
        self._thread = threading.Thread(target=self._loop, args=(tasks, *cpu), daemon=True, name=f"host-{name}")
        self._thread.start()
        return True

    def _write(self, queued_ns: int, cpu_ns: int) -> None:
        for fd, ns in zip(self._fds, (queued_ns, cpu_ns)):
            os.pwrite(fd, f"{ns:{_WIDTH}d}\n".encode(), 0)

    def _loop(self, tasks: str, cpu: str, parse: Callable[[bytes], int]) -> None:
        live: dict[int, tuple[int, int]] = {}  # tid -> (its schedstat's fd, its delay last read)
        gone = 0  # the delay of the tasks that exited
        try:
            counter = os.open(cpu, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            while not self._stop.wait(PERIOD_S):
                try:
                    with open(tasks, "rb") as fh:
                        tids = set(map(int, fh.read().split()))
                    used = parse(os.pread(counter, 4096, 0))
                except (OSError, ValueError):
                    return  # the cgroup is gone: so is the container
                for tid in tids - live.keys():
                    try:
                        live[tid] = (os.open(f"/proc/{tid}/schedstat", os.O_RDONLY | os.O_CLOEXEC), 0)
                    except OSError:
                        continue
                for tid, (fd, last) in list(live.items()):
                    try:
                        live[tid] = (fd, int(os.pread(fd, 128, 0).split()[1]))
                    except (OSError, IndexError, ValueError):  # it exited (the fd is that task's)
                        os.close(fd)
                        del live[tid]
                        gone += last
                self._write(gone + sum(last for _, last in live.values()), used)
        finally:
            os.close(counter)
            for fd, _ in live.values():
                os.close(fd)

    def close(self) -> None:
        """Stop the thread and remove the directory (the container is gone or going)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        shutil.rmtree(self.dir, ignore_errors=True)
