"""codeeval's own cache ($CODEEVAL_CACHE, default ~/.cache/codeeval): content-addressed files
that are expensive to make and safe to rebuild (EvalPlus's expected outputs). Nothing in it
is needed: a fresh machine rebuilds every entry on first use."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from codeeval.core import files


def cache_root() -> Path:
    root = os.environ.get("CODEEVAL_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "codeeval"


def cache_file(kind: str, key: str) -> Path:
    return cache_root() / kind / f"{key[:2]}" / key


def read_cached(path: Path) -> Optional[bytes]:
    try:
        return path.read_bytes()
    except OSError:
        return None


def write_cached(path: Path, data: bytes) -> bytes:
    """Written atomically (a reader never sees half a file); returns `data`."""
    files.write_bytes(path, data)
    return data
