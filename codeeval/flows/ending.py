"""codeeval's flows end Failed without an unnamed "result" artifact when their body raises.

Prefect's engine pickles the exception that ends a flow run into its result storage (a file under
the PREFECT_HOME of whichever host ran it) and sends that record with the Failed state; the
server keeps it as an artifact with no key, and copies it onto the task run that links the run
to its parent (a shard's flow run to its evaluate run, an evaluate run to its nightly). A failed
evaluate run on the work pools carried two: its own, and its failed shard's. The UI lists them as
"result" beside the run's named artifacts (`summary-<run id>`, `failures-...`), and they say
nothing a person can read: the pickle is on another host.

A state the flow returns is stored only when the flow persists its results, which none of ours
does. So the body's exception becomes the Failed state the engine would have made, with the same
message, returned: the engine logs its "Finished in state Failed(...)" line as before, and whoever
called the flow (the CLI, the nightly, the worker's process) gets the exception raised, as before.
The engine's "Encountered exception during execution" line is logged here in its words, so
flows/logs.py shapes it as it shapes the engine's. Two exceptions are left to the engine, which
records none of them either: a TimeoutError (its TimedOut state), and a server that does not
answer (no state can reach it; flows/logs.py says so in one line).
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable

import prefect
from prefect import get_run_logger
from prefect.states import Failed, format_exception

from codeeval.flows.logs import api_unreachable


def flow(**options) -> Callable:
    """prefect.flow(**options) over a body whose exception ends the run as the module says; the
    flow's version is the hash of the body's file, as Prefect gives it (not this file's)."""
    def decorate(fn: Callable):
        if "version" not in options:
            options["version"] = _file_version(fn)
        return prefect.flow(**options)(_failing_quietly(fn))

    return decorate


def _failing_quietly(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def body(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # a BaseException (Ctrl-C, Prefect's Abort and Pause signals) goes on up
            if isinstance(exc, TimeoutError) or api_unreachable(exc) is not None:
                raise  # the engine's own ends: TimedOut (no record either); a server that cannot take a state
            get_run_logger().exception("Encountered exception during execution: %r", exc)
            return Failed(message=f"Flow run encountered an exception: {format_exception(exc)}", data=exc)

    # Prefect validates a run's parameters against the signature, resolving its annotations in the
    # globals of the function it holds (this module's): they are given resolved, from the body's module
    body.__signature__ = inspect.signature(fn, eval_str=True)
    return body


def _file_version(fn: Callable):
    from prefect.utilities.hashing import file_hash

    try:
        path = inspect.getsourcefile(fn)
        return file_hash(path) if path else None
    except (TypeError, OSError):
        return None
