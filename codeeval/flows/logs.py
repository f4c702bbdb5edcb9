"""How the flows' runs log their failures. Prefect logs the exception that ends a flow or task run
with its traceback; for the failures codeeval explains in one line itself (RunFailed: each shard's
root cause; a full disk; an engine that cannot start containers; a shard run that failed or
crashed on its pool) that traceback only buries the line, on the terminal and in a worker's log,
so it is dropped there (the shard's error record keeps its tail: `codeeval inspect`). Those
errors say so by their base class, core/errors.Explained, which a class keeps even when a worker
defines it anew by loading a flow's file. A Prefect server that stops answering
(restarted, gone) ends a flow run's process with three chained tracebacks of httpx internals:
once the flow's file is loaded, they become one line naming the server. Every flow module calls
explain_failures(): a worker loads a flow from its file, not through the package.

A run that ends with RunFailed (its shards' root causes, a refused run, the nightly's failed
models) is read once, from its own log (`prefect deployment run --watch` streams it), so the three
lines Prefect's engine logs for the exception that ends a flow run are reshaped: "Encountered
exception during execution: RunFailed(...)" becomes the message itself, as text (the one place
the causes are stated); "Finished in state Failed(<the same message again>)" becomes one line
naming what failed (RunFailed.headline: the shards, the models); and "Engine execution exited
with unexpected exception", which the runner logs after every flow run that ends by raising, is
dropped for these: a run that failed as designed did not crash, and the line would read as a
crash of codeeval. Any other exception keeps all three lines, with its traceback."""
from __future__ import annotations

import logging
import os
import threading

from codeeval.core.errors import Explained, RunFailed, no_space
from codeeval.tasks.skips import SKIPPED

LOGGERS = ("prefect.flow_runs", "prefect.task_runs", "prefect.engine")


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def api_unreachable(error: BaseException) -> str | None:
    """One line for an error that says the Prefect API did not answer, else None."""
    chain = list(_chain(error))
    if not any(type(e).__name__ in ("ConnectError", "ConnectTimeout") or "Failed to reach API" in str(e)
               for e in chain):
        return None
    reason = " ".join(str(chain[-1]).split()) or type(chain[-1]).__name__
    url = os.environ.get("PREFECT_API_URL") or "its address"
    return f"the Prefect server at {url} does not answer ({reason}): this flow run stops here, finished shards are kept"


# Prefect's flow engine (prefect/flow_engine.py): the lines it logs for the exception that ends a flow run
ENCOUNTERED = "Encountered exception during execution:"
FINISHED_FAILED = "Finished in state Failed("
ENGINE_EXITED = "Engine execution exited with unexpected exception"
FINISHED_SKIPPED = f"Finished in state {SKIPPED}("  # Prefect's task engine, for a state of that name


class _Explained(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.headlines: dict[str, str] = {}  # flow run id -> what its RunFailed names, until its last line

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None:
            return self._finished(record)
        if isinstance(error, RunFailed):
            return self._reshaped(record, error)
        if isinstance(error, Explained) or no_space(error):  # SandboxUnavailable, StageFailed
            record.exc_info, record.exc_text = None, None
        elif (line := api_unreachable(error)) is not None:
            record.msg, record.args = f"{record.getMessage()}: {line}", ()
            record.exc_info, record.exc_text = None, None
        return True

    def _reshaped(self, record: logging.LogRecord, error: RunFailed) -> bool:
        """The engine's lines for a RunFailed (the module's docstring says why)."""
        record.exc_info, record.exc_text = None, None
        text = str(record.msg)
        if text.startswith(ENGINE_EXITED):
            return False
        if text.startswith(ENCOUNTERED):
            record.msg, record.args = "%s: %s", (type(error).__name__, error)
            with self.lock:
                self.headlines[str(getattr(record, "flow_run_id", ""))] = error.headline or type(error).__name__
        return True

    def _finished(self, record: logging.LogRecord) -> bool:
        """"Finished in state Failed(...)" of a run that a RunFailed ended: its headline. A skipped shard's
        line without the type of the state its process keeps (Completed): the server's, which the UI
        shows, is Cancelled (tasks/skips.py)."""
        if str(record.msg).startswith(FINISHED_SKIPPED):
            record.msg = str(record.msg).replace(", type=COMPLETED)", ")")
        if str(record.msg).startswith(FINISHED_FAILED):
            with self.lock:
                headline = self.headlines.pop(str(getattr(record, "flow_run_id", "")), None)
            if headline is not None:
                record.msg, record.args = "Finished in state Failed: %s", (headline,)
        return True


def explain_failures() -> None:
    """Install the filter on Prefect's run loggers (once)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Explained) for f in logger.filters):
            logger.addFilter(_Explained())
