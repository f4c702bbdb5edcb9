"""Allocators that give freed memory back, for processes that run shard after shard.

A run's process writes and reads one Parquet file per shard from a pool of threads. With the
defaults, pyarrow's mimalloc pool and glibc's per-thread malloc arenas kept each shard's freed
buffers, so the process grew with the number of shards (HumanEval x 100: 395 MiB peak RSS, 261
with these settings; bench/scale.py). Results are unchanged: only where freed memory goes.

Also the cyclic GC's pause while a process imports Prefect (gc_paused)."""
from __future__ import annotations

import contextlib
import ctypes
import gc
from typing import Iterator

M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
ARENAS = 2


def lean_allocators() -> None:
    """pyarrow on the system allocator and few malloc arenas (below). Idempotent."""
    import pyarrow as pa

    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())
    limit_malloc_arenas()


def limit_malloc_arenas() -> None:
    """At most ARENAS malloc arenas for the threads that start from now on: called first thing in
    a process (the CLI's main), before any thread has made its own. A libc without mallopt (musl,
    macOS) is left as it is."""
    try:
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, ARENAS)  # the process's own symbols: libc's
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside; what survives is frozen out of later collections. Importing
    Prefect allocates about a million long-lived objects and no cyclic garbage, so collections
    during it only rescan them: a sixth of the import time (bench/overhead.py)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
