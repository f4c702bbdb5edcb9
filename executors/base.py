"""The sandbox interface every executor implements.

A sandbox takes complete programs (candidate + tests) and returns one Outcome
each. It never decides pass/fail by exit code alone: the program must run to
its end, which `runner.py` proves by writing a per-run nonce after the
program returns (an early ``exit(0)`` or a forged atexit exit code never
writes it).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

# Outcome.status values.
PASSED = "passed"
FAILED = "failed"
TIMEOUT = "timeout"
SANDBOX_ERROR = "sandbox_error"  # the sandbox broke, not the program: never a model failure


@dataclass(frozen=True)
class Limits:
    """Per-program resource limits; defaults are documented in docs/security.md."""

    memory_mb: int = 4096  # RLIMIT_AS of the program process
    nproc: int = 64  # RLIMIT_NPROC (not enforced for root outside a container)
    fsize_mb: int = 64  # RLIMIT_FSIZE: largest file the program may write (also caps captured output)
    nofile: int = 256  # RLIMIT_NOFILE
    tail_bytes: int = 2048  # how much of stdout/stderr is kept in the executions table


@dataclass(frozen=True)
class Program:
    """One program to run. `key` is unique within a batch (e.g. 'HumanEval/0#3')."""

    key: str
    code: str
    timeout_s: float = 3.0
    # Apply bigcode/human-eval's `reliability_guard` before the program runs, so that
    # programs it breaks (os.getcwd, subprocess, exit, ...) fail exactly as they do there.
    guard: bool = True


@dataclass
class Outcome:
    key: str
    status: str
    passed: bool
    exit_code: Optional[int]
    duration_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    detail: str = field(default="")  # why: 'no completion marker', 'killed by signal 9', ...


Progress = Optional[Callable[[int], None]]  # called with the number of programs just finished


class Sandbox(abc.ABC):
    """Runs programs in isolation. Use as a context manager so resources are released."""

    name: str = "abstract"

    @abc.abstractmethod
    def run(self, programs: Sequence[Program], progress: Progress = None) -> list[Outcome]:
        """Run every program; the result list is in the same order as `programs`."""

    def close(self) -> None:  # pragma: no cover - default has nothing to release
        pass

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def tail(data: bytes, limit: int) -> str:
    """The last `limit` bytes of an output stream, decoded leniently."""
    return data[-limit:].decode("utf-8", errors="replace") if limit > 0 else ""


def rlimit_spec(limits: Limits, timeout_s: float) -> str:
    """The CODEEVAL_RLIMITS string runner.apply_limits understands (CPU time: wall timeout + 1 s)."""
    mib = 1024 * 1024
    return ",".join([
        f"as={limits.memory_mb * mib}",
        f"nproc={limits.nproc}",
        f"fsize={limits.fsize_mb * mib}",
        f"nofile={limits.nofile}",
        f"cpu={int(timeout_s) + 1}",
        "core=0",
    ])
