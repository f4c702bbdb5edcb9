"""Progress: what a long stage calls as work finishes, and the bars that show it (stderr, so stdout
stays clean for results)."""
from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator, Optional

# Called with the number of items (samples, programs) just finished; None: nobody is watching.
Progress = Optional[Callable[[int], None]]


@contextlib.contextmanager
def progress_bar(total: int, desc: str, unit: str = "sample") -> Iterator[Callable[[int], None]]:
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
    try:
        yield bar.update
    finally:
        bar.close()
