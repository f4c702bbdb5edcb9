"""Processes named so that the name outlives them: host, boot, pid and start time.

A pid alone names whichever process has it now: the kernel gives a dead holder's pid to the next
process, and a reboot renews them all. (host, boot id, pid, start time in clock ticks since boot)
names one process for ever, so a record that carries it tells whether its process still runs.
Sandbox containers (executors/docker/owners.py) and repository slots (tasks/slot_holders.py) are owned
this way.
"""
from __future__ import annotations

import ctypes
import os
import signal
import socket
from dataclasses import dataclass
from typing import Optional

# Set to "1" by the CLI while its private Prefect API server runs (codeeval/prefect_api.py): that
# server's database is this host's, so every holder of its slots is a process of this host.
PRIVATE_API_ENV = "CODEEVAL_PRIVATE_API"
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In a forked child before exec (a Popen's preexec_fn): SIGKILL when the thread that started it
    dies (kept across exec), so a killed parent leaves no child behind; exits at once when the parent
    died before the signal was armed."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def boot_id() -> str:
    """This boot of this host (a pid recorded before a reboot names nothing now)."""
    try:
        return open("/proc/sys/kernel/random/boot_id").read().strip()
    except OSError:
        return "unknown"


def start_time(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (None when it is gone)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclass(frozen=True)
class ProcessName:
    host: str
    boot: str
    pid: int
    start: Optional[str]

    @classmethod
    def this(cls) -> "ProcessName":
        pid = os.getpid()
        return cls(socket.gethostname(), boot_id(), pid, start_time(pid))

    def alive(self) -> Optional[bool]:
        """Whether the process runs: None for another host's (not this host's to judge)."""
        if self.host != socket.gethostname():
            return None
        return self.boot == boot_id() and self.start is not None and start_time(self.pid) == self.start

    def __str__(self) -> str:
        return f"pid {self.pid} on host {self.host}"
