"""The sandbox server's clean state between two programs (stdlib only; in the image beside
docker_server.py): every other process killed and reaped, the program's data files in and out,
and the scratch space (/tmp, /dev/shm, /out) wiped when the program left anything behind."""
from __future__ import annotations

import base64
import os
import shutil
import signal
import stat
import time

SCRATCH_DIRS = ("/tmp", "/dev/shm", "/out")
WORK = "/tmp/work"
OUT = "/out"  # its own tmpfs: a program that fills /tmp still has its traceback captured
REAP_DEADLINE_S = 5.0


def kill_everything_else() -> bool:
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


def wipe(path: str) -> bool:
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


def write_files(files: dict) -> list[str]:
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


def remove_files(paths: list[str]) -> None:
    """Remove the data files again if they are still plain files (anything else: wipe)."""
    for path in paths:
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


def pristine() -> bool:
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


def prepare() -> None:
    os.makedirs(WORK, mode=0o700)
    os.makedirs(OUT, mode=0o700, exist_ok=True)


def wipe_scratch() -> bool:
    """Wipe every scratch directory there is; False if something could not be removed."""
    clean = True
    for path in SCRATCH_DIRS:
        if os.path.isdir(path):
            clean = wipe(path) and clean
    return clean


def restore(written: list[str], clean: bool) -> bool:
    """After a program (every other process dead): its data files removed, the scratch space
    wiped if it left anything else, the working directory made again. Returns whether the
    sandbox is clean (`clean`: so far)."""
    remove_files(written)
    if not pristine():
        clean = wipe_scratch() and clean
    if clean and not os.path.isdir(WORK):
        try:
            prepare()
        except OSError:
            clean = False
    return clean
