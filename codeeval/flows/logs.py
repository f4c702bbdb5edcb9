"""How the flows' runs log their failures. Prefect logs the exception that ends a flow or task run
with its traceback; for the failures codeeval explains in one line itself (RunFailed: each shard's
root cause; a full disk; an engine that cannot start containers; a shard run that failed or
crashed on its pool) that traceback only buries the line, on the terminal and in a worker's log,
so it is dropped there (the shard's error record keeps its tail: `codeeval inspect`). Those
errors say so by their base class, core/errors.Explained, which a class keeps even when a worker
defines it anew by loading flows/stages.py from its file. A Prefect server that stops answering
(restarted, gone) ends a flow run's process with three chained tracebacks of httpx internals:
once the flow's file is loaded, they become one line naming the server. Every flow module calls
explain_failures(): a worker loads a flow from its file, not through the package."""
from __future__ import annotations

import logging
import os

from codeeval.core.errors import Explained, no_space

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


class _Explained(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is None:
            return True
        if isinstance(error, Explained) or no_space(error):  # RunFailed, SandboxUnavailable, StageFailed
            record.exc_info, record.exc_text = None, None
        elif (line := api_unreachable(error)) is not None:
            record.msg, record.args = f"{record.getMessage()}: {line}", ()
            record.exc_info, record.exc_text = None, None
        return True


def explain_failures() -> None:
    """Install the filter on Prefect's run loggers (once)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Explained) for f in logger.filters):
            logger.addFilter(_Explained())
