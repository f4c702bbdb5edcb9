"""The evaluate run's side of shards on work pools: which deployment a shard goes to, the task that
runs it there as a flow run and waits for it (`remote_shard`), and the errors it ends with. The
flows themselves, which a worker loads from their file, are in codeeval/flows/stages.py; this
module is what the evaluate flow imports, so `codeeval run` does not build the four stage flows.

Why per-stage deployments (run_deployment) and not Prefect task workers: a work pool is the
thing a team already points at its hosts (`prefect worker start --pool gpu`), with per-pool
concurrency, pause and job variables in the UI; task workers have no pools, no UI of their own,
and would route by task name only. Each shard is a flow run on its pool, linked under the
evaluate run, named like the task run it replaces (`generate-humaneval-shard-003`), and inside
it the same `generate`/`execute` task runs with its cache, retries and failure artifact.
"""
from __future__ import annotations

import time
from pathlib import Path

from prefect import get_run_logger, task

from codeeval.core.artifacts import RunLayout
from codeeval.core.contracts import ShardId
from codeeval.core.errors import Explained
from codeeval.flows.guard import from_deployment
from codeeval.flows.links import name_link
from codeeval.generation import LOADS_WEIGHTS
from codeeval.tasks.shards import _kept, content_key
from codeeval.tasks.skips import skipped

GENERATE = "generate-shard/generate-shard"
GENERATE_CPU = "generate-shard/generate-shard-cpu"
EXECUTE = "execute-shard/execute-shard"
TRAIN = "train-shard/train-shard"  # a classification task's training and prediction shards: the gpu pool
PREDICT = "predict-shard/predict-shard"

class StageFailed(Explained):
    """A shard's flow run on its work pool did not complete (its own run page says why; the
    evaluate run links to it by `flow_run_id`). Its text names the shard only: the shard task's
    "Finished in state Failed(...)" line in the evaluate run's log, where the run's end states the
    `cause` (that run's state message) once, for every shard (flows/logs.py)."""

    def __init__(self, message: str, flow_run_id: str = "", cause: str = ""):
        given = (message, flow_run_id, cause)
        while len(given) > 1 and not given[-1]:  # a retry's log line shows the repr: no `, ''` in it
            given = given[:-1]
        super().__init__(*given)  # args rebuild it when unpickled in the evaluate run
        self.flow_run_id, self.cause = flow_run_id, cause

    def __str__(self) -> str:
        return str(self.args[0])


class StageCrashed(StageFailed):
    """A shard's flow run crashed: its process died before it could say why (the Prefect server
    was unreachable when it started or ended, the host went down). An infrastructure failure:
    the evaluate run starts the shard again (`infra_retries`)."""


def crashed(task, task_run, state) -> bool:
    """remote_shard's retry_condition_fn: only a crashed shard run. Any other failure of the shard
    is its own (its run retried its infrastructure errors already), and an error while this task
    waited on the shard may leave that run going: starting the shard again would run it twice."""
    return state.is_failed() and isinstance(state.result(raise_on_failure=False), StageCrashed)


def use_deployments(mode: str) -> bool:
    """"deployments": always; "local": never; "auto": when this evaluate run itself came from a
    deployment (a worker started it) and both stage deployments exist on its server."""
    if mode in ("local", "deployments"):
        return mode == "deployments"
    from prefect.client.orchestration import get_client

    if not from_deployment():  # `codeeval run` or `codeeval nightly`: no API call needed
        return False
    with get_client(sync_client=True) as client:
        try:
            for name in (GENERATE, EXECUTE):
                client.read_deployment_by_name(name)
        except Exception:  # noqa: BLE001 - ObjectNotFound: no stage deployments, stay in-process
            return False
    return True


def generation_deployment(kind: str) -> str:
    """Where a backend of `kind` generates: the gpu pool's deployment for one that loads weights, the
    cpu pool's for the others, if the server has it (a team that deployed before it had none: the gpu
    pool's then, said once in the run's log)."""
    if kind in LOADS_WEIGHTS:
        return GENERATE
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(GENERATE_CPU)
            return GENERATE_CPU
        except Exception:  # noqa: BLE001 - ObjectNotFound
            get_run_logger().warning("no %s deployment on this server (`prefect deploy --all` makes it): the %s "
                                     "backend's shards take the gpu pool", GENERATE_CPU, kind)
            return GENERATE


class NoDeployment(Explained):
    """A stage deployment that this run needs is not on the server."""


def deployment_needed(name: str) -> None:
    """NoDeployment, in one line, when the server lacks the deployment `name` (a team that deployed
    before the classification tasks existed: `codeeval deploy` again applies it)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(name)
        except Exception:  # noqa: BLE001 - ObjectNotFound
            raise NoDeployment(f"no {name} deployment on this server: `codeeval deploy` applies it (its shards run "
                               "on the gpu pool)") from None


@task(name="shard", retry_condition_fn=crashed)
def remote_shard(deployment: str, shard: ShardId, parameters: dict, key: str, after=None) -> str:
    """Runs one shard as a flow run of `deployment` and waits for it. An execution shard gets
    its generation shard's result as `after` (its file's path, or the upstream error). A shard
    whose file is already there (same key) is kept without starting anything; one whose input
    a failed shard never wrote is Skipped, like the in-process shards."""
    if deployment in (EXECUTE, PREDICT):  # `after`: its generation shard's file, or its training's
        upstream = ShardId(shard.task, "generate", shard.index) if deployment == EXECUTE else \
            ShardId(shard.task, "train", 0)
        if ends := skipped([(RunLayout.run_name(upstream), after)]):
            return ends
    if deployment == EXECUTE:
        parameters = {**parameters, "generations_path": after}
        key = content_key({"cache_key": key, "generations_path": after})  # as execute_shard's own key
    elif deployment == PREDICT:
        parameters = {**parameters, "trained_path": after}
    out_path = str(RunLayout(Path(parameters["run_dir"])).output(shard))
    if kept := _kept(out_path, key):  # this process's code wrote it (the worker's would be checked there)
        return kept
    from prefect.deployments import run_deployment

    run_name = RunLayout.run_name(shard)
    run = _followed(run_deployment(deployment, parameters={**parameters, "shard": shard}, flow_run_name=run_name,
                                   timeout=0), run_name)
    get_run_logger().info("%s ran on work pool %s: %s", run_name, run.work_pool_name, run.state.name)
    if run.state.is_crashed():
        why = run.state.message or "its process died"
        raise StageCrashed(f"{run_name} on pool {run.work_pool_name} crashed: {why}", str(run.id))
    if not run.state.is_completed():
        raise StageFailed(f"{run_name} failed on pool {run.work_pool_name}", str(run.id),
                          run.state.message or run.state.name)
    return out_path


POLL_S = 2.0  # how often a shard's run is read while this task waits on it


def _followed(run, run_name: str):
    """The shard's flow run, once final: its link named as the shard at once (flows/links.py), then
    the run waited for as run_deployment would."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        name_link(run.parent_task_run_id, run_name, client)
        while not (run.state and run.state.is_final()):
            time.sleep(POLL_S)
            run = client.read_flow_run(run.id)
    return run
