"""The fork server that runs inside each sandbox container (stdlib only).

The Docker sandbox starts one long-lived container per worker slot with this script
as PID 1 and talks to it over a Unix socket the host mounts into the container
(`--channel PATH`; channel.py), else over the container's stdin/stdout: frames of
a 4-byte big-endian length followed by UTF-8 JSON.

    -> {"ready": true, "cpu_clock": str, "cpu_rate": float, "queued": str, "host_cpu": str|null, ...}   once
    <- {"key": str, "code": str, "timeout": float, "clock": float, "wall": float, "guard": bool,
        "rlimits": str, "tail": int}
    -> {"key": str, "exit_code": int|null, "finished": bool, "limit": "ended"|"cpu"|"clock"|"wall",
        "duration": float, "cpu": float, "stdout": str, "stderr": str}   one per request

`timeout` is a limit of CPU seconds, `clock` one of the program's clock (wall time less the
time every process in the container but the server spent waiting for a CPU: schedstat; under
gVisor, whose /proc has none, the delay of the container's host tasks, which the host writes to
cputime.HOST_QUEUED: executors/docker/hostclocks.py; `queued` names the source), `wall`
the wall-clock cap (cputime.watch). The CPU is read
from the container's own cgroup (cputime.container_clock; `cpu_clock` names the file):
it counts the server, idle while it waits, and every thread, child and orphan of the
program. Under gVisor, whose CPU time counts the waits for the host's CPU too, it is at most
the container's host cgroup's CPU time since the same moment, which the host writes to HOST_CPU
(`host_cpu` names it; cputime.least_since). It is read before the fork, again only once the
program could have used its limit (cputime.watch), and after every process is dead: `cpu` is
the tree's total.

Each program runs in a fresh child forked from this pre-imported interpreter: its own
session and process group, the rlimits of runner.apply_limits, stdin /dev/null,
stdout/stderr into files on the /out tmpfs (capped by RLIMIT_FSIZE and the tmpfs
size), a fresh working directory, and runner.execute, which writes the one-time nonce
to fd 3 only when the program ran to its end (runner.py says what that does and does
not prove). The server keeps its own descriptors of the two output files and reads the
tails through them, never by path (the program may replace the paths). After a limit or the
child's exit, every other process in the container is killed (the
process group first, then kill(-1), which also reaches detached daemons), the orphans
are reaped, and the scratch space (/tmp, /dev/shm) is wiped. As PID 1 of its PID
namespace the server cannot be killed by the programs (the kernel drops such signals
from inside), and it makes itself non-dumpable so that programs cannot ptrace it or
read its memory.

The server exits when its channel closes (the host closed the sandbox or died; also in
the middle of a program, which is then killed), and with a non-zero status when it
cannot restore a clean state; the host then replaces the container.

This file is the request loop; beside it (in the image too, flat in /opt/codeeval: the
`server_` prefix keeps them from shadowing a module a program imports, as this directory is on
its sys.path): server_frames.py, the channel's framing; server_fork.py, the program's process
(compile, fork, isolate, watch); server_reset.py, the clean state between two programs.
"""
from __future__ import annotations

import base64
import gc
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cputime  # noqa: E402  (copied beside this file in the image)
import runner  # noqa: E402
import server_fork  # noqa: E402
import server_reset  # noqa: E402
from server_frames import Channel, open_channel  # noqa: E402
from server_reset import OUT  # noqa: E402

HOST_CPU = "/run/codeeval-host/cpu"  # hostclocks.MOUNT/CPU, mounted by the host under gVisor only

# Pre-import what the runner and typical benchmark programs import, so that each
# forked child starts warm. (Programs get fresh globals; module objects are shared.)
import builtins, collections, faulthandler, functools, hashlib, heapq, itertools  # noqa: E401,E402,F401
import math, random, re, resource, secrets, shutil, string, subprocess, traceback, typing  # noqa: E401,E402,F401


def run_one(req: dict, devnull: int, channel: Channel, clock: cputime.Clock, rate: float,
            host_cpu) -> tuple[dict, bool]:
    """Run one program; returns (response, clean) where clean says the scratch space is restored."""
    nonce = secrets.token_hex(16)
    limit = int(req.get("tail", 2048))
    server_fork.warm(req.get("preimport", ()))  # a harness's modules (numpy): imported in the parent once, uncharged
    compiled = server_fork.precompile(req["code"])
    marker_r, marker_w = os.pipe()
    # Kept open here after the fork: the tails are read through these descriptors. Reopening
    # the paths afterwards would let the program swap in a FIFO (open blocks forever) or a link.
    out_fd = os.open(f"{OUT}/stdout", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    err_fd = os.open(f"{OUT}/stderr", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    result_fd = os.open(f"{OUT}/result", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    written = server_reset.write_files(req.get("files") or {})
    used = cputime.least_since(clock, host_cpu)  # before the fork: the child's every CPU second counts
    started = time.monotonic()
    pid = server_fork.fork(req, compiled, nonce, marker_w, out_fd, err_fd, result_fd, devnull)
    os.close(marker_w)
    timeout = float(req.get("timeout", 3.0))
    why, factor = server_fork.wait(pid, used, timeout, float(req.get("clock", timeout)),
                                   float(req["wall"]), rate, channel,
                                   float(req.get("speed_reference", cputime.REFERENCE_S)))
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _, status = os.waitpid(pid, 0)
    duration = time.monotonic() - started
    clean = server_reset.kill_everything_else()
    response = {
        "key": req.get("key"),
        "exit_code": os.waitstatus_to_exitcode(status),
        "finished": runner.completed(marker_r, nonce),  # closes marker_r
        "limit": why,
        "slowdown": factor,
        "duration": duration,
        "cpu": used(),  # every process is dead and reaped: the tree's total
        "stdout": runner.read_tail(out_fd, limit),
        "stderr": runner.read_tail(err_fd, limit),
        "result": base64.b64encode(runner.read_head(result_fd, int(req.get("result_bytes", 0)))).decode(),
    }
    for fd in (out_fd, err_fd, result_fd):
        os.close(fd)
    return response, server_reset.restore(written, clean)


def main() -> int:
    channel, warm = open_channel(sys.argv[1:])
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # nothing but the protocol may reach the host's stdout
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    server_fork.prctl_dumpable(0)
    os.environ.clear()  # nothing of the container's environment reaches the programs
    os.environ.update(server_fork.ENV)
    server_fork.warm(warm)  # the sandbox's start-up modules (numpy outside the plain Python image)
    gc.freeze()
    server_reset.wipe_scratch()
    server_reset.prepare()
    clock, source = cputime.container_clock()
    rate = cputime.max_rate()
    host_cpu = cputime.host_clock(HOST_CPU)
    channel.send({"ready": True, "pid": os.getpid(), "uid": os.getuid(), "python": sys.version.split()[0],
                  "cpu_clock": source, "cpu_rate": rate,
                  "queued": cputime.HOST_QUEUED if cputime.host_queued() else "schedstat",
                  "host_cpu": HOST_CPU if host_cpu else None})
    while True:
        req = channel.receive()
        if req is None:
            return 0
        sys.stdout.flush()
        sys.stderr.flush()
        response, clean = run_one(req, devnull, channel, clock, rate, host_cpu)
        if channel.eof:
            return 0
        channel.send(response)
        if not clean:
            print("docker_server: could not restore a clean sandbox; exiting", file=sys.stderr)
            return 3


if __name__ == "__main__":
    sys.exit(main())
