"""The fork server that runs inside each sandbox container (stdlib only).

The Docker sandbox starts one long-lived container per worker slot with this script
as PID 1 and talks to it over a Unix socket the host mounts into the container
(`--channel PATH`; channel.py), else over the container's stdin/stdout: frames of
a 4-byte big-endian length followed by UTF-8 JSON.

    -> {"ready": true, "cpu_clock": str, "cpu_rate": float, ...}   once, at start
    <- {"key": str, "code": str, "timeout": float, "clock": float, "wall": float, "guard": bool,
        "rlimits": str, "tail": int}
    -> {"key": str, "exit_code": int|null, "finished": bool, "limit": "ended"|"cpu"|"clock"|"wall",
        "duration": float, "cpu": float, "stdout": str, "stderr": str}   one per request

`timeout` is a limit of CPU seconds, `clock` one of the program's clock (wall time less the
time every process in the container but the server spent waiting for a CPU: schedstat), `wall`
the wall-clock cap (cputime.watch). The CPU is read
from the container's own cgroup (cputime.container_clock; `cpu_clock` names the file):
it counts the server, idle while it waits, and every thread, child and orphan of the
program. It is read before the fork, again only once the program could have used its
limit (cputime.watch), and after every process is dead: `cpu` is the tree's total.

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
"""
from __future__ import annotations

import base64
import gc
import json
import os
import select
import signal
import socket
import stat
import struct
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cputime  # noqa: E402  (copied beside this file in the image)
import runner  # noqa: E402

# Pre-import what the runner and typical benchmark programs import, so that each
# forked child starts warm. (Programs get fresh globals; module objects are shared.)
import builtins, collections, faulthandler, functools, hashlib, heapq, itertools  # noqa: E401,E402,F401
import math, random, re, resource, secrets, shutil, string, subprocess, traceback, typing  # noqa: E401,E402,F401

SCRATCH_DIRS = ("/tmp", "/dev/shm", "/out")
WORK = "/tmp/work"
OUT = "/out"  # its own tmpfs: a program that fills /tmp still has its traceback captured
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": WORK,
    "TMPDIR": WORK,
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": WORK,
    "CODEEVAL_RESULT_FD": "4",  # the result channel (runner.py): /out/result, read back whole
}
REAP_DEADLINE_S = 5.0


def _libc_prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None


_PRCTL = _libc_prctl()


def _prctl_dumpable(flag: int) -> None:
    if _PRCTL is not None:
        _PRCTL(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE


class Channel:
    """Framed JSON over two fds, buffered so that the server can notice EOF while a program runs."""

    def __init__(self, rfd: int, wfd: int):
        self.rfd, self.wfd = rfd, wfd
        self.buffer = b""
        self.eof = False

    def fill(self) -> None:
        """Read what is available (call when rfd is readable); sets `eof` when the host hung up."""
        chunk = os.read(self.rfd, 1 << 20)
        if chunk:
            self.buffer += chunk
        else:
            self.eof = True

    def _take(self, n: int) -> bytes | None:
        while len(self.buffer) < n:
            if self.eof:
                return None
            self.fill()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive(self) -> dict | None:
        head = self._take(4)
        if head is None:
            return None
        body = self._take(struct.unpack(">I", head)[0])
        return None if body is None else json.loads(body)

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        data = struct.pack(">I", len(body)) + body
        while data:
            data = data[os.write(self.wfd, data):]


def _child(req: dict, compiled, nonce: str, marker_w: int, out_fd: int, err_fd: int, result_fd: int,
           devnull: int) -> None:
    """In the forked child: isolate, limit, run. Never returns."""
    os.setsid()
    _prctl_dumpable(1)
    try:  # the program, never the server, is the OOM victim
        fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
        os.write(fd, b"1000")
        os.close(fd)
    except OSError:
        pass
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.dup2(marker_w, 3)
    os.dup2(result_fd, 4)
    os.closerange(5, 1 << 16)
    os.chdir(WORK)  # the environment is ENV already (set once in main, inherited)
    sys.argv = ["<program>"]
    runner.apply_limits(req.get("rlimits", ""))
    runner.execute(req["code"], bool(req.get("guard", True)), 3, nonce, compiled=compiled,
                   preimport=tuple(req.get("preimport", ())), merge_stderr=bool(req.get("merge_stderr")))


def _kill_everything_else() -> bool:
    """SIGKILL every other process of the container and reap them; False if some survive."""
    deadline = time.monotonic() + REAP_DEADLINE_S
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # all processes we may signal, except ourselves (and PID 1)
        except ProcessLookupError:
            pass
        while True:  # reap whatever is dead
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                break
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)


def _wipe(path: str) -> bool:
    """Remove everything under `path` (the program may have chmod-ed things)."""
    ok = True
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            for dirpath, dirnames, _ in os.walk(full):
                for d in dirnames:
                    try:
                        os.chmod(os.path.join(dirpath, d), 0o700)
                    except OSError:
                        pass
            try:
                os.chmod(full, 0o700)
            except OSError:
                pass
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except FileNotFoundError:
                pass
        if os.path.lexists(full):
            ok = False
    return ok


def _write_files(files: dict) -> list[str]:
    """The program's data files (base64 in the request) into its working directory."""
    written = []
    for name, data in files.items():
        if not name or "/" in name or name in (".", ".."):
            continue  # the host never sends such names (base.safe_name); never follow one
        path = os.path.join(WORK, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(base64.b64decode(data))
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        written.append(path)
    return written


def _remove_files(paths: list[str]) -> None:
    """Remove the data files again if they are still plain files (anything else: _wipe)."""
    for path in paths:
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


def _pristine() -> bool:
    """True when the program left nothing behind (the common case): no wipe needed.
    /out's files are truncated before the next program starts."""
    try:
        work = os.lstat(WORK)
        return (stat.S_ISDIR(work.st_mode) and stat.S_IMODE(work.st_mode) == 0o700
                and os.listdir("/tmp") == ["work"] and not os.listdir(WORK)
                and set(os.listdir(OUT)) <= {"stdout", "stderr", "result"}
                and all(stat.S_ISREG(os.lstat(f"{OUT}/{n}").st_mode) for n in os.listdir(OUT))
                and (not os.path.isdir("/dev/shm") or not os.listdir("/dev/shm")))
    except OSError:
        return False


def _prepare() -> None:
    os.makedirs(WORK, mode=0o700)
    os.makedirs(OUT, mode=0o700, exist_ok=True)


def _wait(pid: int, used: cputime.Clock, cpu_limit: float, clock_limit: float, wall_cap: float, rate: float,
          channel: Channel, speed_reference: float) -> tuple[str, float]:
    """Wait for the child until it exits, the CPU it `used` passes `cpu_limit` (stretched by the
    machine's slowdown), its clock (wall time less the run-queue delay of every other process in
    the container) passes `clock_limit`, `wall_cap` passes, or the host hangs up (cputime.watch).
    The child is left to reap: an exited one stays a zombie, its last delay readable.

    Returns (cputime.ENDED | CPU | CLOCK | WALL, the slowdown factor)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None

    def wait(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
            if channel.eof:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            waits = [channel.rfd] + ([pidfd] if pidfd is not None else [])
            ready, _, _ = select.select(waits, [], [], left if pidfd is not None else min(left, 0.002))
            if channel.rfd in ready:
                channel.fill()

    try:
        return cputime.watch(wait, used, cpu_limit, clock_limit, wall_cap, rate,
                             stretch=lambda: cputime.paused_slowdown(pid, speed_reference),
                             queued=cputime.others_queued())
    finally:
        if pidfd is not None:
            os.close(pidfd)


PRECOMPILE_MAX = 64 * 1024  # larger sources are compiled in the child, under its rlimits


def _precompile(code: str):
    """Compile here, once, instead of in the child (fewer copy-on-write faults per program).
    None when the child must compile itself: an error or a warning is then reported on the
    program's own stderr, exactly as a fresh interpreter would report it."""
    if len(code) > PRECOMPILE_MAX:
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            compiled = runner.compile_program(code)
        except Exception:
            return None
    return None if caught else compiled


def run_one(req: dict, devnull: int, channel: Channel, clock: cputime.Clock, rate: float) -> tuple[dict, bool]:
    """Run one program; returns (response, clean) where clean says the scratch space is restored."""
    nonce = secrets.token_hex(16)
    limit = int(req.get("tail", 2048))
    _warm(req.get("preimport", ()))  # a harness's modules (numpy): imported in the parent once, uncharged
    compiled = _precompile(req["code"])
    marker_r, marker_w = os.pipe()
    # Kept open here after the fork: the tails are read through these descriptors. Reopening
    # the paths afterwards would let the program swap in a FIFO (open blocks forever) or a link.
    out_fd = os.open(f"{OUT}/stdout", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    err_fd = os.open(f"{OUT}/stderr", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    result_fd = os.open(f"{OUT}/result", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    written = _write_files(req.get("files") or {})
    cpu_before = clock()  # before the fork: the child's every CPU second counts
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _child(req, compiled, nonce, marker_w, out_fd, err_fd, result_fd, devnull)
        finally:
            os._exit(70)
    os.close(marker_w)
    timeout = float(req.get("timeout", 3.0))
    why, factor = _wait(pid, lambda: clock() - cpu_before, timeout, float(req.get("clock", timeout)),
                        float(req["wall"]), rate, channel, float(req.get("speed_reference", cputime.REFERENCE_S)))
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _, status = os.waitpid(pid, 0)
    duration = time.monotonic() - started
    clean = _kill_everything_else()
    response = {
        "key": req.get("key"),
        "exit_code": os.waitstatus_to_exitcode(status),
        "finished": runner.completed(marker_r, nonce),  # closes marker_r
        "limit": why,
        "slowdown": factor,
        "duration": duration,
        "cpu": clock() - cpu_before,  # every process is dead and reaped: the tree's total
        "stdout": runner.read_tail(out_fd, limit),
        "stderr": runner.read_tail(err_fd, limit),
        "result": base64.b64encode(runner.read_head(result_fd, int(req.get("result_bytes", 0)))).decode(),
    }
    for fd in (out_fd, err_fd, result_fd):
        os.close(fd)
    _remove_files(written)
    if not _pristine():
        for path in SCRATCH_DIRS:
            if os.path.isdir(path):
                clean = _wipe(path) and clean
    if clean and not os.path.isdir(WORK):
        try:
            _prepare()
        except OSError:
            clean = False
    return response, clean


def _warm(modules) -> None:
    """Import `modules` here, once (after ENV pins numpy's thread pools to one thread, so that the
    server forks no threads), so that every child finds them loaded. Only what is asked for: each
    module loaded here makes every fork and every child's exit dearer (numpy: +0.4 ms of CPU a
    program, a tenth of a HumanEval program's whole cost). Then gc.freeze(): the collector of a
    child never walks (so never copies) the pages of the objects inherited from here."""
    new = [m for m in modules if m not in sys.modules]
    for name in new:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - the child imports it again and reports the error itself
            pass
    if new:
        gc.freeze()


def _open_channel(argv: list[str]) -> tuple[Channel, list[str]]:
    """The host's channel: the Unix socket named by `--channel PATH` (a read-only bind mount of
    a host directory; channel.py), else stdin and stdout (a remote engine mounts no host
    path). Returns it and the rest of argv."""
    if argv[:1] == ["--channel"]:
        path, argv = argv[1], argv[2:]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
        else:
            fd = sock.detach()
            return Channel(fd, fd), argv
    return Channel(os.dup(0), os.dup(1)), argv


def main() -> int:
    channel, warm = _open_channel(sys.argv[1:])
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # nothing but the protocol may reach the host's stdout
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _prctl_dumpable(0)
    os.environ.clear()  # nothing of the container's environment reaches the programs
    os.environ.update(ENV)
    _warm(warm)  # the sandbox's start-up modules (numpy outside the plain Python image)
    gc.freeze()
    for path in SCRATCH_DIRS:
        if os.path.isdir(path):
            _wipe(path)
    _prepare()
    clock, source = cputime.container_clock()
    rate = cputime.max_rate()
    channel.send({"ready": True, "pid": os.getpid(), "uid": os.getuid(), "python": sys.version.split()[0],
                  "cpu_clock": source, "cpu_rate": rate})
    while True:
        req = channel.receive()
        if req is None:
            return 0
        sys.stdout.flush()
        sys.stderr.flush()
        response, clean = run_one(req, devnull, channel, clock, rate)
        if channel.eof:
            return 0
        channel.send(response)
        if not clean:
            print("docker_server: could not restore a clean sandbox; exiting", file=sys.stderr)
            return 3


if __name__ == "__main__":
    sys.exit(main())
