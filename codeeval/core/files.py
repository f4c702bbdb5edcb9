"""Atomic local writes: a temporary file beside the target, renamed into place.

A crash never leaves a half-written file that a re-run would take for a finished one; the
temporary file's name holds the writer's pid, and `sweep_partial` removes those of dead
writers. Files are created as open(2) does, 0666 less the umask (tempfile.mkstemp's are 0600
whatever the umask), so what the harness writes can be read by the rest of the team.
The bottom of the core: artifacts, storage and cache all write through here.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

TMP_SUFFIX = ".partial"


def write_atomically(path: Path, write) -> Path:
    """`write(tmp)` into a temporary file beside `path`, renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_temporary(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_bytes(path: Path, data: bytes) -> Path:
    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    return write_atomically(path, write)


def _create_temporary(path: Path) -> str:
    """An empty new file beside `path`, mode 0666 less the umask (tempfile.mkstemp's are 0600 whatever
    the umask; reading the umask with os.umask would change it for a moment for every thread)."""
    while True:
        tmp = str(path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


def umask() -> int:
    """This process's umask, read without changing it (os.umask would, for a moment, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def readable(path: Path) -> None:
    """Give a file that a library wrote 0600 (safetensors, tempfile) the mode open(2) would have."""
    os.chmod(path, 0o666 & ~umask())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_partial(root: Path) -> list[Path]:
    """Remove temporary files that a killed run left under `root` (their writer is gone)."""
    removed = []
    for tmp in root.rglob(f".*{TMP_SUFFIX}") if root.is_dir() else ():
        parts = tmp.name[:-len(TMP_SUFFIX)].split(".")  # "", name..., pid, random
        if len(parts) >= 4 and parts[-2].isdigit() and not _pid_alive(int(parts[-2])):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed
