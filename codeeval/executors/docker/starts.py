"""A cap on how many containers this process starts at once (CODEEVAL_MAX_CONTAINER_STARTS).

Creating and starting a container is a burst of work in the engine and the runtime (under gVisor
more so: a Sentry and its platform come up per container). Sixty-four shards that start their
containers at once on two cores would queue inside the engine until the starts time out; here they
queue for a turn instead, and a container's start timeout counts from its turn. Separate from how
many programs run at once (the sandbox's workers): a started container costs nothing to keep.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator, Optional

MAX_STARTS_ENV = "CODEEVAL_MAX_CONTAINER_STARTS"

_lock = threading.Lock()
_turns: Optional[threading.BoundedSemaphore] = None
_cap = 0
_active = 0
peak = 0  # the most starts that were under way at once in this process (the tests read it)


def cap() -> int:
    """The cap: MAX_STARTS_ENV, else the host's cores (at least 2)."""
    value = os.environ.get(MAX_STARTS_ENV, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{MAX_STARTS_ENV} must be a positive integer, not {value!r}")
        return int(value)
    return max(2, os.cpu_count() or 1)


@contextlib.contextmanager
def turn() -> Iterator[None]:
    """Hold one of the cap's turns while a container is created, started and greets us."""
    global _turns, _cap, _active, peak
    with _lock:
        if _turns is None or _cap != cap():
            _cap = cap()
            _turns = threading.BoundedSemaphore(_cap)
        turns = _turns
    with turns:
        with _lock:
            _active += 1
            peak = max(peak, _active)
        try:
            yield
        finally:
            with _lock:
                _active -= 1
