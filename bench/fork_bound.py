"""The fork bound: what executing programs costs with no isolation at all, for bench/execution.py.

The bound is W warm Python processes (W = the sandbox's workers), each forking one child per
program; the child runs it through the same `runner.execute` as the sandbox's children (bigcode's
guard, `exec` in fresh globals, the marker) with its output to /dev/null, and the parent waits for
it. No container, no rlimits, no CPU watch, no output capture, no round trip: only what every
fork-per-program executor must do (fork, run, reap). Not `fork + exec python`: a fresh
interpreter costs ~15 ms of CPU per program and would make a loose bound. Programs are handed
out through one pipe of 4-byte indices (dynamic, like the sandbox's queue); each worker compiles
a program before forking it, as the sandbox's server does. Timed from the first index written to
the last worker's exit; the workers' own start (a warm process is the premise) is not timed.
"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXECUTORS = Path(__file__).resolve().parents[1] / "codeeval" / "executors"

WORKER = r"""
import os, struct, sys
sys.path.insert(0, sys.argv[1])
import runner
# warm as the sandbox's server is (docker_server.py's pre-imports)
import builtins, collections, faulthandler, functools, hashlib, heapq, itertools  # noqa
import math, random, re, resource, secrets, shutil, string, subprocess, traceback, typing  # noqa
import json
programs = json.load(open(sys.argv[2]))
jobs = int(sys.argv[3])
devnull = os.open(os.devnull, os.O_RDWR)
passed = 0
os.write(1, b"r")
while True:
    head = os.read(jobs, 4)
    if not head:
        break
    code, guard = programs[struct.unpack("<I", head)[0]]
    compiled = runner.compile_program(code)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        runner.execute(code, guard, devnull, "done", compiled=compiled)
    _, status = os.waitpid(pid, 0)
    passed += os.waitstatus_to_exitcode(status) == 0
os.write(1, str(passed).encode())
"""


def fork_bound(programs: list[tuple[str, bool]], workers: int) -> tuple[float, int]:
    """(programs/s, programs that exited 0) for `programs` as (code, guard) pairs."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(programs, fh)
    read_end, write_end = os.pipe()
    try:
        procs = [subprocess.Popen([sys.executable, "-I", "-c", WORKER, str(EXECUTORS), fh.name, str(read_end)],
                                  stdout=subprocess.PIPE, pass_fds=(read_end,)) for _ in range(workers)]
        os.close(read_end)
        for p in procs:
            assert p.stdout.read(1) == b"r", "fork-bound worker failed to start"
        started = time.perf_counter()
        data = b"".join(struct.pack("<I", i) for i in range(len(programs)))
        for at in range(0, len(data), 4096):  # writes of at most PIPE_BUF are atomic: no index is split
            os.write(write_end, data[at:at + 4096])
        os.close(write_end)
        passed = sum(int(p.stdout.read() or 0) for p in procs)
        for p in procs:
            p.wait()
        elapsed = time.perf_counter() - started
    finally:
        os.unlink(fh.name)
    return len(programs) / elapsed, passed
