"""Environment variables a run sets for itself and gives back afterwards, so that a caller that runs
the CLI in-process, or starts other programs after it, gets its own environment back."""
from __future__ import annotations

import contextlib
import os
from typing import Iterable, Iterator


@contextlib.contextmanager
def restored(names: Iterable[str]) -> Iterator[None]:
    """The variables `names` as they were on entry, on the way out (set, changed or removed inside)."""
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
