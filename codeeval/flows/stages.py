"""Shards on work pools: the `generate-shard` (gpu pool), `generate-shard-cpu` and `execute-shard`
(cpu pool) deployments, and the task that the `evaluate` flow runs for each shard when it uses them.
A backend that loads weights generates on the gpu pool; one that does not (an API, saved generations,
the reference) on the cpu pool: a run that waits on a server must not hold a GPU worker.

Why per-stage deployments (run_deployment) and not Prefect task workers: a work pool is the
thing a team already points at its hosts (`prefect worker start --pool gpu`), with per-pool
concurrency, pause and job variables in the UI; task workers have no pools, no UI of their own,
and would route by task name only. Each shard is a flow run on its pool, linked under the
evaluate run, named like the task run it replaces (`generate-humaneval-shard-003`), and inside
it the same `generate`/`execute` task runs with its cache, retries and failure artifact.

Shard files go to the run directory: a shared filesystem mounted alike everywhere (`--output_dir`,
or CODEEVAL_STORAGE for runs/<run_id>), or an fsspec store (CODEEVAL_STORAGE=s3://...) that each
host mirrors, paths from another host rebased onto its own mirror (codeeval/core/storage.py).
"""
from __future__ import annotations

import time
from pathlib import Path

from prefect import get_run_logger, task

from codeeval.core import storage
from codeeval.core.artifacts import RunLayout
from codeeval.core.contracts import ShardId
from codeeval.core.errors import Explained
from codeeval.executors import SandboxSpec
from codeeval.executors.pool import POOL
from codeeval.flows.ending import flow  # prefect.flow, ending Failed with no unnamed result artifact
from codeeval.flows.guard import enforce, from_deployment, worker_policy
from codeeval.flows.links import name_link
from codeeval.flows.logs import explain_failures
from codeeval.generation import LOADS_WEIGHTS, BackendSpec
from codeeval.generation.hf import devices
from codeeval.pipeline.policy import shard_request
from codeeval.tasks.shards import _kept, content_key, execute_shard, generate_shard, stale
from codeeval.tasks.skips import skipped
from codeeval.tasks.training import predict_shard, train_task
from codeeval.training.args import TrainArgs

GENERATE = "generate-shard/generate-shard"
GENERATE_CPU = "generate-shard/generate-shard-cpu"
EXECUTE = "execute-shard/execute-shard"
TRAIN = "train-shard/train-shard"  # a classification task's training and prediction shards: the gpu pool
PREDICT = "predict-shard/predict-shard"
explain_failures()  # this file is what a worker loads for a shard run


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


def _run_name() -> str:
    """The shard's run name; its parameter arrives as JSON (a dict) where the engine names the run
    before validating the parameters."""
    from prefect.runtime import flow_run

    shard = flow_run.parameters.get("shard")
    return RunLayout.run_name(shard if isinstance(shard, ShardId) else ShardId(**shard))


def _allowed(shard: ShardId, layout: RunLayout, run_id: str, reads: dict, **runs) -> tuple[str, str]:
    """The shard's file and run name, once this worker's policy allows what the shard reads, writes
    and runs (`runs`: its backend or its sandbox); a refusal ends the run in one line."""
    out_path, run_name = str(layout.output(shard)), RunLayout.run_name(shard)
    enforce(worker_policy(), shard_request({**reads, "out_path": out_path}, name=shard.task, **runs),
            f"{run_name}-{run_id}")
    return out_path, run_name


def _layout(run_dir: str) -> RunLayout:
    """The run's files on this host (a run directory in a storage URL is mirrored here)."""
    return RunLayout(Path(storage.localize(run_dir)))


def _as_shard(task, run_name: str, out_path: str, infra_retries: int, retry_delay_s: float):
    """A stage flow's task, named as its shard, retried on infrastructure errors, its Prefect cache
    record refreshed when other code wrote its file."""
    return task.with_options(name=run_name, task_run_name=run_name, retries=infra_retries,
                             retry_delay_seconds=retry_delay_s, refresh_cache=stale(out_path))


@flow(name="generate-shard", flow_run_name=_run_name)
def generate_stage(shard: ShardId, run_dir: str, problems_path: str, start: int, stop: int, backend: BackendSpec,
                   cache_key: str, infra_retries: int = 2, retry_delay_s: float = 10.0, run_id: str = "") -> str:
    """One generation shard on this host: a gpu pool host's first visible device, or (generate-shard-cpu)
    a cpu pool host that calls an API, replays saved generations or hands out the reference."""
    problems_path, layout = storage.localize(problems_path), _layout(run_dir)
    out_path, run_name = _allowed(shard, layout, run_id, {"problems_path": problems_path}, backend=backend)
    backend = devices.plan(backend, max_shards=1)[0]
    return _as_shard(generate_shard, run_name, out_path, infra_retries, retry_delay_s)(
        shard, layout, problems_path, start, stop, backend, cache_key, run_id)


@flow(name="execute-shard", flow_run_name=_run_name)
def execute_stage(shard: ShardId, run_dir: str, problems_path: str, generations_path: str, sandbox: SandboxSpec,
                  cache_key: str, infra_retries: int = 2, retry_delay_s: float = 10.0, run_id: str = "") -> str:
    """One execution shard in this (cpu pool) host's sandbox (its Docker engine: DOCKER_HOST)."""
    problems_path, layout = storage.localize(problems_path), _layout(run_dir)
    generations_path = storage.localize(generations_path)
    out_path, run_name = _allowed(shard, layout, run_id, {"problems_path": problems_path,
                                                           "generations_path": generations_path}, sandbox=sandbox)
    try:
        return _as_shard(execute_shard, run_name, out_path, infra_retries, retry_delay_s)(
            shard, layout, problems_path, generations_path, sandbox, cache_key, run_id)
    finally:
        POOL.close()


@flow(name="train-shard", flow_run_name=_run_name)
def train_stage(shard: ShardId, run_dir: str, splits: list, classes: list, backend: BackendSpec, args: TrainArgs,
                cache_key: str, infra_retries: int = 2, retry_delay_s: float = 10.0, run_id: str = "") -> str:
    """A classification task's training on this (gpu pool) host: every visible device, data-parallel."""
    layout = _layout(run_dir)
    splits = tuple((name, storage.localize(path)) for name, path in splits)
    out_path, run_name = _allowed(shard, layout, run_id, dict(splits), backend=backend)
    return _as_shard(train_task, run_name, out_path, infra_retries, retry_delay_s)(
        shard, layout, splits, tuple(classes), backend, args, cache_key, run_id)


@flow(name="predict-shard", flow_run_name=_run_name)
def predict_stage(shard: ShardId, run_dir: str, problems_path: str, start: int, stop: int, classes: list,
                  backend: BackendSpec, args: TrainArgs, trained_path: str, cache_key: str, infra_retries: int = 2,
                  retry_delay_s: float = 10.0, run_id: str = "") -> str:
    """A prediction shard of a classification task on this (gpu pool) host's first visible device."""
    problems_path, layout = storage.localize(problems_path), _layout(run_dir)
    trained_path = storage.localize(trained_path)
    out_path, run_name = _allowed(shard, layout, run_id, {"problems_path": problems_path,
                                                           "trained_path": trained_path}, backend=backend)
    backend = devices.plan(backend, max_shards=1)[0]
    return _as_shard(predict_shard, run_name, out_path, infra_retries, retry_delay_s)(
        shard, layout, problems_path, start, stop, tuple(classes), backend, args, trained_path, cache_key, run_id)
