"""The sandbox server's program process (stdlib only; in the image beside docker_server.py):
compiled in the server, forked from its pre-imported interpreter, isolated and limited in the
child, and watched until it ends or reaches a limit."""
from __future__ import annotations

import gc
import os
import select
import signal
import sys
import time
import warnings

import cputime
import runner
from server_frames import Channel
from server_reset import WORK

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
PRECOMPILE_MAX = 64 * 1024  # larger sources are compiled in the child, under its rlimits


def _libc_prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None


_PRCTL = _libc_prctl()


def prctl_dumpable(flag: int) -> None:
    if _PRCTL is not None:
        _PRCTL(4, flag, 0, 0, 0)  # PR_SET_DUMPABLE


def drop_to(uid: int) -> None:
    """Give the working directory and its files to `uid`, then become it, with no capability left:
    the program can then neither signal the server nor open its descriptors."""
    for name in [WORK, *(os.path.join(WORK, n) for n in os.listdir(WORK))]:
        os.lchown(name, uid, uid)
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def precompile(code: str):
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


def warm(modules) -> None:
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


def fork(req: dict, compiled, nonce: str, marker_w: int, out_fd: int, err_fd: int, result_fd: int,
         devnull: int) -> int:
    """Fork the program's child; returns its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _child(req, compiled, nonce, marker_w, out_fd, err_fd, result_fd, devnull)
        finally:
            os._exit(70)
    return pid


def _child(req: dict, compiled, nonce: str, marker_w: int, out_fd: int, err_fd: int, result_fd: int,
           devnull: int) -> None:
    """In the forked child: isolate, limit, run. Never returns."""
    os.setsid()
    if req.get("uid") is not None:  # a server that runs as root (gVisor): the program as another uid
        drop_to(int(req["uid"]))
    prctl_dumpable(1)
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


def wait(pid: int, used: cputime.Clock, cpu_limit: float, clock_limit: float, wall_cap: float, rate: float,
         channel: Channel, speed_reference: float) -> tuple[str, float]:
    """Wait for the child until it exits, the CPU it `used` passes `cpu_limit` (stretched by the
    machine's slowdown), its clock (wall time less the run-queue delay of every other process in
    the container, or, under gVisor, of the container's host tasks, measured by the host:
    cputime.others_queued) passes `clock_limit`, `wall_cap` passes, or the host hangs up
    (cputime.watch).
    The child is left to reap: an exited one stays a zombie, its last delay readable.

    Returns (cputime.ENDED | CPU | CLOCK | WALL, the slowdown factor)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None

    def ended(seconds: float) -> bool:
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
        return cputime.watch(ended, used, cpu_limit, clock_limit, wall_cap, rate,
                             stretch=lambda: cputime.paused_slowdown(pid, speed_reference),
                             queued=cputime.others_queued())
    finally:
        if pidfd is not None:
            os.close(pidfd)
