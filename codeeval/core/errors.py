"""Errors the CLI reports as one line with exit code 2 (bad input, not a bug), the one kind of
OSError it names in one line too (a full disk), and the marker classes that say what kind of
failure one of codeeval's own errors is. A marker is checked with `isinstance`, never by class
name: a worker loads a flow from its file, so a class defined in a flow's module is another
class object than the package's, but its bases from this module are the same objects."""
from __future__ import annotations

import difflib
import errno
import re

# pyarrow's OSError carries the errno in its text only ("[errno 28] No space left on device")
_NO_SPACE_TEXT = re.compile(r"No space left on device|Disk quota exceeded", re.I)


class Infrastructure(Exception):
    """Marker: the machinery failed (a sandbox, the Docker engine), not the model: a retry may
    succeed (pipeline/failures.is_infrastructure, tasks/retries.py)."""


class Explained(Exception):
    """Marker: the message says in one line all a user needs; the run log drops its traceback
    (flows/logs.py), the shard's error record keeps its tail (`codeeval inspect`)."""


class UsageError(Exception):
    """Bad input from the user: unknown task, malformed file, k > n, missing data dir..."""


class RunFailed(Explained):
    """Some task runs failed; the message says why (every root cause), and a re-run retries only
    those. `headline` is one line naming what failed (the shards, the models): the last line a
    flow run's log ends with (codeeval/flows/logs.py), the causes being stated once above it."""

    def __init__(self, message: str = "", headline: str | None = None):
        super().__init__(message)
        self.headline = headline

    def __reduce__(self):  # pickled with its headline (a task's or a subflow's persisted result)
        return type(self), (str(self), self.headline)


def no_space(error: BaseException | str) -> bool:
    """Whether a write failed for want of space (the device or a quota full): an OSError, or a
    root cause as failures.root_cause writes it."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(error, (OSError, str)) and _NO_SPACE_TEXT.search(str(error)) is not None


def did_you_mean(name: object, choices) -> str:
    """'did you mean X?' for the closest of `choices` to a misspelled `name` (difflib's ratio
    >= 0.6), else '': the one place every "unknown ..." message takes its suggestion from."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f"did you mean {close[0]}?" if close else ""


def unknown(what: str, name: object, choices, listing: str | None = None) -> str:
    """The one line for a name that is not one of `choices`: "unknown task 'humanevall'; did you
    mean humaneval? (`codeeval tasks` lists all 311)". `listing` replaces "choose from a, b, ..."
    where the choices are too many to print."""
    hint = did_you_mean(name, choices)
    listing = listing or f"choose from {', '.join(map(str, choices))}"
    return f"unknown {what} {name!r}" + (f"; {hint}" if hint else "") + f" ({listing})"
