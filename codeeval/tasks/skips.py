"""A shard whose input a failed shard never wrote ends `Skipped`, and the Prefect UI shows it grey,
naming the failure it waited on.

The flow passes a shard its upstream futures through allow_failure, so that it starts, takes its
own name in the UI and ends, instead of staying Pending under a hash name. It ends with two states:

- in this process, Completed named Skipped, holding a NotRun: what the tasks that wait on it see.
  Prefect lets a task wait on a Failed upstream through allow_failure, never on a Cancelled one
  (that task would end NotReady: "did not reach a 'COMPLETED' state"), and the flow counts and
  reports what was skipped from this state (flows/evaluate.py `_outcome`);
- on the server, Cancelled named Skipped, with the failed shards' names in its message: what the
  UI, which colours a run by its state's type, draws grey (Completed is green: a person would read
  the shard as done), and what the API answers. Cancelled, not Failed: nothing failed here, and
  a red shard reads as a failure of its own.

Task run states reach the server as events, recorded in the order of their timestamps. The
Cancelled one is emitted from the task's body, stamped after the Completed one this task returns
(made first), so the server keeps it as the run's state whenever the Completed one arrives; both
timestamps come from this host's clock, so a server whose clock differs changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Optional, Sequence

from prefect import get_run_logger
from prefect.context import TaskRunContext
from prefect.states import Cancelled, Completed, State

from codeeval.core.contracts import TaskScore
from codeeval.pipeline import failures

SKIPPED = "Skipped"
NAMED = 3  # failed shards a message names; the others are counted


@dataclass(frozen=True)
class NotRun:
    """The result of a Skipped shard: what its downstream shards see instead of a path. `failed`: the
    run names of the failed shards it waited on (through other skipped shards, too)."""
    why: str
    failed: tuple[str, ...] = ()


def skipped(upstream: Sequence[tuple[str, Any]]) -> Optional[State]:
    """The state of a shard whose inputs include one a failed shard never wrote, else None.
    `upstream`: (the run name of the shard that makes the input, the input as Prefect resolved it)."""
    errors = [(name, value) for name, value in upstream if not isinstance(value, (str, TaskScore))]
    if not errors:
        return None
    failed: dict[str, None] = {}  # in order, once each
    for name, value in errors:
        failed.update(dict.fromkeys(value.failed if isinstance(value, NotRun) and value.failed else (name,)))
    first = errors[0][1]
    why = first.why if isinstance(first, NotRun) else (
        failures.root_cause(first) if isinstance(first, BaseException) else str(first))
    # the message names the failed shards, not their causes: the run states each cause once, at its end
    # (flows/logs.py), and each failed shard's own page holds it
    message = f"not run: waiting on {_names(list(failed))}, which failed"
    state = Completed(name=SKIPPED, data=NotRun(why, tuple(failed)), message=message)
    _shown_cancelled(state)
    return state


def _names(names: list[str]) -> str:
    if len(names) <= NAMED:
        return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return f"{', '.join(names[:NAMED])} and {len(names) - NAMED} more"


def _shown_cancelled(local: State) -> None:
    """Record Cancelled, named Skipped, as this task run's state on the server: stamped after `local`,
    the Completed state the task returns (the module's docstring says why). Through the function
    Prefect's task engine emits its states with (tested on prefect 3.8.8): should a release move it,
    the shard shows green again and its log says why, and the run goes on as before."""
    context = TaskRunContext.get()
    if context is None or context.task_run is None:  # called outside a task run: nothing to show
        return
    run = context.task_run
    shown = Cancelled(name=SKIPPED, message=local.message)
    shown.timestamp = max(shown.timestamp, local.timestamp + timedelta(microseconds=1))
    shown.state_details.task_run_id, shown.state_details.flow_run_id = run.id, run.flow_run_id
    try:
        from prefect.utilities.engine import emit_task_run_state_change_event

        emit_task_run_state_change_event(task_run=run.model_copy(update={"end_time": shown.timestamp}),
                                         initial_state=run.state, validated_state=shown)
    except Exception as exc:  # noqa: BLE001 - the colour in the UI, never the run's outcome
        get_run_logger().warning("%s: not shown as skipped in the UI (%s: %s)", run.name, type(exc).__name__, exc)
