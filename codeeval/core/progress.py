"""Progress bars for long stages (stderr, so stdout stays clean for results)."""
from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

from tqdm import tqdm


@contextlib.contextmanager
def progress_bar(total: int, desc: str, unit: str = "sample") -> Iterator[Callable[[int], None]]:
    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
    try:
        yield bar.update
    finally:
        bar.close()
