"""The Prefect flows. Prefect logs the exception that ends a flow or task run with its traceback;
for the failures codeeval explains in one line itself (RunFailed: each shard's root cause; a
full disk; an engine that cannot start containers) that traceback only buries the line, on the
terminal and in a worker's log, so it is dropped there. The shard's error record keeps its
traceback's tail (`codeeval inspect`)."""
from __future__ import annotations

import logging

from codeeval.core.errors import RunFailed, no_space

EXPLAINED = ("SandboxUnavailable",)  # class names (codeeval/executors/engine.py): nothing imported for them


class _Explained(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and (isinstance(error, RunFailed) or no_space(error)
                                  or any(c.__name__ in EXPLAINED for c in type(error).__mro__)):
            record.exc_info, record.exc_text = None, None
        return True


for _name in ("prefect.flow_runs", "prefect.task_runs"):
    logging.getLogger(_name).addFilter(_Explained())
