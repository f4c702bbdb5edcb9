"""Local subprocess sandbox: a fresh interpreter per program, rlimits, process-group kill.

For development and trusted code (`--executor local`). It isolates resources, not
the file system or network: untrusted model output belongs in the Docker sandbox.

The CPU limit counts the program's process group, read from /proc (cputime.group_clock):
the harness shares its cgroup, so the cgroup's counter would count the harness too. So does
the clock's run-queue delay (cputime.group_queued). A process that leaves the group (setsid)
escapes the count as it escapes the kill.
"""
from __future__ import annotations

import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from codeeval.core.progress import Progress
from codeeval.executors import cputime, runner
from codeeval.executors.base import Limits, Outcome, Program, Sandbox, classify, rlimit_spec, safe_name

RUNNER = Path(__file__).with_name("runner.py")
SCRATCH_PREFIX = "codeeval-scratch-"  # + the owner's pid: what a killed run leaves is found and removed


def sweep_stale_scratch() -> list[Path]:
    """Remove the scratch directories of sandboxes whose process is gone (a SIGKILLed run)."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        pid = path.name[len(SCRATCH_PREFIX):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class LocalSandbox(Sandbox):
    name = "local"

    def __init__(self, n_workers: int = 0, limits: Limits = Limits(), python: str = sys.executable):
        self.n_workers = n_workers or os.cpu_count() or 1
        self.limits = limits
        self.python = python
        self.rate = cputime.max_rate()
        sweep_stale_scratch()

    def run(self, programs: Sequence[Program], progress: Progress = None) -> list[Outcome]:
        def one(program: Program) -> Outcome:
            outcome = self._run_one(program)
            if progress:
                progress(1)
            return outcome

        with ThreadPoolExecutor(max_workers=self.n_workers) as pool:
            return list(pool.map(one, programs))

    def _run_one(self, program: Program) -> Outcome:
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        try:
            return self._run_in(scratch, program)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _run_in(self, scratch: Path, program: Program) -> Outcome:
        workdir = scratch / "work"
        workdir.mkdir()
        for name, data in program.files.items():
            (workdir / safe_name(name)).write_bytes(data)
        source = scratch / "program.py"
        source.write_text(program.code, encoding="utf-8")
        nonce = secrets.token_hex(16)
        fds: dict[str, int] = {}  # every descriptor opened here, closed at the end
        try:
            # The nonce travels in a pipe, not in the child's environment (/proc/self/environ).
            fds["nonce_r"], nonce_w = os.pipe()
            os.write(nonce_w, nonce.encode())
            os.close(nonce_w)
            fds["marker_r"], fds["marker_w"] = os.pipe()
            # Kept open here: the tails are read through these descriptors, never by path.
            fds["out"] = os.open(scratch / "stdout", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            fds["err"] = os.open(scratch / "stderr", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            fds["result"] = os.open(scratch / "result", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            env = {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": str(workdir),
                "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1",
                "CODEEVAL_NONCE_FD": str(fds["nonce_r"]),
                "CODEEVAL_MARKER_FD": str(fds["marker_w"]),
                "CODEEVAL_GUARD": "1" if program.guard else "0",
                "CODEEVAL_RLIMITS": rlimit_spec(self.limits, program.timeout_s),
                "CODEEVAL_RESULT_FD": str(fds["result"]),
                "CODEEVAL_PARENT_PID": str(os.getpid()),
                "CODEEVAL_PREIMPORT": ",".join(program.preimport),
                "CODEEVAL_MERGE_STDERR": "1" if program.merge_stderr else "0",
            }
            started = time.monotonic()
            proc = subprocess.Popen(
                [self.python, "-I", str(RUNNER), str(source)],
                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=fds["out"], stderr=fds["err"],
                start_new_session=True, pass_fds=(fds["nonce_r"], fds["marker_w"], fds["result"]), close_fds=True,
            )
            for name in ("nonce_r", "marker_w"):  # the child's now
                os.close(fds.pop(name))
            why, cpu, factor = _watch(proc.pid, program, self.rate, self.limits.speed_reference_s)
            _kill_group(proc.pid)
            proc.wait()
            duration = time.monotonic() - started
            finished = runner.completed(fds.pop("marker_r"), nonce)  # closes it
            limit = self.limits.tail_bytes
            return classify(program, proc.returncode, finished, why, duration, cpu,
                            runner.read_tail(fds["out"], limit), runner.read_tail(fds["err"], limit),
                            runner.read_head(fds["result"], self.limits.result_bytes), factor)
        finally:
            for fd in fds.values():
                os.close(fd)


def _watch(pid: int, program: Program, rate: float, speed_reference: float) -> tuple[str, float, float]:
    """Wait until the program (the leader of process group `pid`) exits or breaks a limit
    (cputime.watch); returns (cputime.ENDED | CPU | CLOCK | WALL, the group's CPU seconds, the
    slowdown factor). Read before the leader is reaped: an exited leader stays a zombie, its
    times (and its reaped children's) and its run-queue delay still in /proc."""
    clock = cputime.group_clock(pid)
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None

    def exited(seconds: float) -> bool:
        if pidfd is not None:
            return bool(select.select([pidfd], [], [], seconds)[0])
        deadline = time.monotonic() + seconds
        while not os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))
        return True

    try:
        why, factor = cputime.watch(exited, clock, program.timeout_s, program.clock_limit_s, program.wall_cap_s,
                                    rate, stretch=lambda: cputime.paused_slowdown(pid, speed_reference),
                                    queued=cputime.group_queued(pid))
        return why, clock(), factor
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _kill_group(pgid: int) -> None:
    """Kill the program's whole process group (children it left behind included)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
