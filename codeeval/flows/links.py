"""A run's link in its parent's run graph is named as the run it stands for. Prefect links a flow
run to the run that started it through a task run of the parent's that it names itself: a subflow's
`<flow name>-<n>` (the nightly's three models read `evaluate-0`, `evaluate-1`, `evaluate-2`), a
run_deployment's at random (`objective-ladybug`). Neither can be named when Prefect creates it (a
subflow's is named after its flow, and a flow renamed per model would be another flow in the UI),
so the run's own code names it once it exists: a subflow as its body begins, within a second of
the link's creation; a shard's waiting task as soon as run_deployment returns. Only the name
changes: the link's key, which a retried parent uses to find a finished subflow, stays Prefect's."""
from __future__ import annotations

from typing import Optional
from uuid import UUID


def name_link(link_id: Optional[UUID], name: str, client=None) -> None:
    """Name the task run `link_id` (None: the run has no parent, nothing to name)."""
    if link_id is None:
        return
    if client is not None:
        client.set_task_run_name(link_id, name)
        return
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as own:
        own.set_task_run_name(link_id, name)


def name_own_link() -> None:
    """From a flow run's body: its link in the run that started it, named as this run."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = context.flow_run if context is not None else None
    if run is not None:
        name_link(run.parent_task_run_id, run.name)
