"""The per-repository host lock, and the name of the repository's cross-host lock.

A host-local `flock` on the project's directory itself (an O_RDONLY descriptor: nothing is
written in the user's tree, and every run on the host meets there whatever its cache): the
kernel drops it when its holder dies, so whoever holds it knows no live process on this host is
patching the repository. Across hosts, the execution declares `limit_name(project)` as a lock key
(benchmarks/repo/execution.py) and the orchestration holds that Prefect global concurrency limit
around the shard (codeeval/tasks/slots.py); `/` becomes `:` because Prefect bans `/` in names.
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


PREFIX = "repo:"


def limit_name(project_path: str) -> str:
    return PREFIX + project_path.strip("/").replace("/", ":")


def describe_limit(name: str) -> str:
    """What a limit guards, in words: `repository Utilities/boltons` for `repo:Utilities:boltons`."""
    return f"repository {name[len(PREFIX):].replace(':', '/')}" if name.startswith(PREFIX) else name


@contextmanager
def host_lock(project_dir: Path) -> Iterator[None]:
    fd = os.open(project_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock
