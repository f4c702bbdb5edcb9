"""Local subprocess sandbox: a fresh interpreter per program, rlimits, process-group kill.

For development and trusted code (`--executor local`). It isolates resources, not
the file system or network: untrusted model output belongs in the Docker sandbox.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from codeeval.executors.base import (
    FAILED, PASSED, TIMEOUT, Limits, Outcome, Program, Progress, Sandbox, rlimit_spec, tail,
)

RUNNER = Path(__file__).with_name("runner.py")


class LocalSandbox(Sandbox):
    name = "local"

    def __init__(self, n_workers: int = 0, limits: Limits = Limits(), python: str = sys.executable):
        self.n_workers = n_workers or os.cpu_count() or 1
        self.limits = limits
        self.python = python

    def run(self, programs: Sequence[Program], progress: Progress = None) -> list[Outcome]:
        def one(program: Program) -> Outcome:
            outcome = self._run_one(program)
            if progress:
                progress(1)
            return outcome

        with ThreadPoolExecutor(max_workers=self.n_workers) as pool:
            return list(pool.map(one, programs))

    def _run_one(self, program: Program) -> Outcome:
        scratch = Path(tempfile.mkdtemp(prefix="codeeval-"))
        try:
            return self._run_in(scratch, program)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _run_in(self, scratch: Path, program: Program) -> Outcome:
        workdir = scratch / "work"
        workdir.mkdir()
        source = scratch / "program.py"
        source.write_text(program.code, encoding="utf-8")
        nonce = secrets.token_hex(16)
        read_end, write_end = os.pipe()
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(workdir),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "CODEEVAL_NONCE": nonce,
            "CODEEVAL_MARKER_FD": str(write_end),
            "CODEEVAL_GUARD": "1" if program.guard else "0",
            "CODEEVAL_RLIMITS": rlimit_spec(self.limits, program.timeout_s),
        }
        started = time.monotonic()
        with open(scratch / "stdout", "wb") as out, open(scratch / "stderr", "wb") as err:
            proc = subprocess.Popen(
                [self.python, "-I", str(RUNNER), str(source)],
                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, pass_fds=(write_end,), close_fds=True,
            )
        os.close(write_end)
        timed_out = False
        try:
            proc.wait(timeout=program.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(proc.pid)
        proc.wait()
        duration = time.monotonic() - started
        marker = _read_all(read_end)
        limit = self.limits.tail_bytes
        stdout = tail((scratch / "stdout").read_bytes(), limit) if (scratch / "stdout").exists() else ""
        stderr = tail((scratch / "stderr").read_bytes(), limit) if (scratch / "stderr").exists() else ""
        code = proc.returncode
        if timed_out:
            return Outcome(program.key, TIMEOUT, False, code, duration, stdout, stderr,
                           f"timed out after {program.timeout_s:g}s")
        finished = marker.strip() == nonce.encode()
        if code == 0 and finished:
            return Outcome(program.key, PASSED, True, 0, duration, stdout, stderr)
        detail = _why(code, finished)
        return Outcome(program.key, FAILED, False, code, duration, stdout, stderr, detail)


def _kill_group(pgid: int) -> None:
    """Kill the program's whole process group (children it left behind included)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _why(code: int | None, finished: bool) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:  # a real-time signal has no name
            return f"killed by signal {-code}"
    if code == 0 and not finished:
        return "exited 0 before the tests finished (no completion marker)"
    return f"exit code {code}"
