"""The run-queue delay of a gVisor container, measured on the host and handed to its server.

A program's clock is its wall time less the time it waited for a CPU (cputime.limits). Under
runc the server reads that from the programs' schedstat; gVisor's /proc has none, and its
kernel counts a wait for the host's CPU as running. The host sees the waits: the container's
host tasks (the Sentry, its ptrace stubs, which run the program) are its host cgroup's tasks.
A `HostWaits` per container sums their /proc/<tid>/schedstat second field in a thread every
PERIOD_S (each task's last reading kept once it exits) and writes the total, in nanoseconds,
fixed-width at offset 0 of a file in a private directory that the container mounts read-only
at MOUNT; the server reads it with pread (docker_server.py, cputime.file_queued). gVisor
rereads such a file's contents at every pread (runsc 20221219; tests/test_gvisor.py, "crowded").

Under runc nothing of this is made: the server's own schedstat reading is exact and free.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Optional

MOUNT = "/run/codeeval-host"  # where the container sees the directory
FILE = "queued"  # docker_server.py's HOST_QUEUED is MOUNT/FILE
PERIOD_S = 0.05  # how stale the server's reading may be (it reads the clock every 0.2 s); ~13 ms of host CPU a second
_WIDTH = 20
_CGROUP_V1 = ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu")


def tasks_file(pid: int) -> Optional[str]:
    """The file listing the host tasks of `pid`'s cgroup (v1 `tasks` of its cpuacct hierarchy,
    v2 `cgroup.threads`), whichever driver named it; None when unreadable."""
    try:
        with open(f"/proc/{pid}/cgroup") as fh:
            lines = [line.rstrip("\n").split(":", 2) for line in fh]
    except OSError:
        return None
    candidates = []
    for _, controllers, path in (line for line in lines if len(line) == 3):
        if controllers == "":
            candidates.append(f"/sys/fs/cgroup{path}/cgroup.threads")
        elif {"cpuacct", "cpu"} & set(controllers.split(",")):
            candidates += [f"{root}{path}/tasks" for root in _CGROUP_V1]
    return next((c for c in candidates if os.path.exists(c)), None)


class HostWaits:
    """One container's host-side run-queue delay, written to `path` while `follow` runs."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="codeeval-host-")
        os.chmod(self.dir, 0o755)  # the server reads it as gVisor's root, the program may too: no secret
        self.path = os.path.join(self.dir, FILE)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._write(0)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def flags(self) -> list[str]:
        return ["-v", f"{self.dir}:{MOUNT}:ro"]

    def follow(self, pid: int, name: str = "") -> bool:
        """Start summing the waits of the cgroup of the container's host process `pid`; False
        (the file stays 0) when its cgroup cannot be read."""
        tasks = tasks_file(pid)
        if tasks is None:
            return False
        self._thread = threading.Thread(target=self._loop, args=(tasks,), daemon=True, name=f"waits-{name}")
        self._thread.start()
        return True

    def _write(self, ns: int) -> None:
        os.pwrite(self._fd, f"{ns:{_WIDTH}d}\n".encode(), 0)

    def _loop(self, tasks: str) -> None:
        live: dict[int, tuple[int, int]] = {}  # tid -> (its schedstat's fd, its delay last read)
        gone = 0  # the delay of the tasks that exited
        try:
            while not self._stop.wait(PERIOD_S):
                try:
                    with open(tasks, "rb") as fh:
                        tids = set(map(int, fh.read().split()))
                except OSError:
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
                self._write(gone + sum(last for _, last in live.values()))
        finally:
            for fd, _ in live.values():
                os.close(fd)

    def close(self) -> None:
        """Stop the thread and remove the directory (the container is gone or going)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        shutil.rmtree(self.dir, ignore_errors=True)
