"""When Prefect retries a shard's task run: on an infrastructure error only
(pipeline/failures.is_infrastructure). Here, not in pipeline/, because it reads a Prefect state."""
from __future__ import annotations

from codeeval.pipeline.failures import is_infrastructure


def retry_condition(task, task_run, state) -> bool:
    """Prefect's retry_condition_fn: retry infrastructure errors only."""
    error = state.result(raise_on_failure=False) if state.is_failed() else None
    return isinstance(error, BaseException) and is_infrastructure(error)
