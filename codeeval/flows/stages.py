"""Shards on work pools: the `generate-shard` (gpu pool), `generate-shard-cpu` and `execute-shard`
(cpu pool) flows, and `train-shard` / `predict-shard` (gpu pool), as a worker runs them: each runs one
shard's task on its host. A backend that loads weights generates on the gpu pool; one that does not
(an API, saved generations, the reference) on the cpu pool: a run that waits on a server must not
hold a GPU worker. The evaluate run's side (which deployment, the task that waits on the shard's
flow run) is codeeval/flows/remote.py.

Shard files go to the run directory: a shared filesystem mounted alike everywhere (`--output_dir`,
or CODEEVAL_STORAGE for runs/<run_id>), or an fsspec store (CODEEVAL_STORAGE=s3://...) that each
host mirrors, paths from another host rebased onto its own mirror (codeeval/core/storage.py).
"""
from __future__ import annotations

from pathlib import Path

from codeeval.core import storage
from codeeval.core.artifacts import RunLayout
from codeeval.core.contracts import ShardId
from codeeval.executors import SandboxSpec
from codeeval.executors.pool import POOL
from codeeval.flows.ending import flow  # prefect.flow, ending Failed with no unnamed result artifact
from codeeval.flows.guard import enforce, worker_policy
from codeeval.flows.logs import explain_failures
from codeeval.generation import BackendSpec
from codeeval.generation.hf import devices
from codeeval.pipeline.policy import shard_request
from codeeval.tasks.shards import execute_shard, generate_shard, stale
from codeeval.tasks.training import predict_shard, train_task
from codeeval.training.args import TrainArgs

explain_failures()  # this file is what a worker loads for a shard run


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
