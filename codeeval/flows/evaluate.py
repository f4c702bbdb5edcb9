"""The `evaluate` flow: load -> shard -> generate -> execute -> score -> publish.

Generation shards are dealt round-robin over the visible devices (one model per device,
no `accelerate launch` needed) and run one after another on each; execution shards run
one after another (one sandbox pool), except a task whose execution serializes itself
(`Execution.concurrent_shards`: repo-level, one lock per repository). The chains overlap: shard i executes while shard
i+1 generates. Every shard is a named task run whose cache key hashes its inputs
(problems, model, generation args, code version): a re-run skips finished shards.
"""
from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from prefect import allow_failure, flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.settings import PREFECT_UI_URL
from prefect.task_runners import ThreadPoolTaskRunner

from codeeval.benchmarks.registry import get_task
from codeeval.core import artifacts, files, provenance, storage
from codeeval.core.contracts import PlannedTask, Reuse
from codeeval.core.errors import RunFailed
from codeeval.core.fingerprint import code_version, digest
from codeeval.core.results import RunResults
from codeeval.executors.pool import POOL
from codeeval.flows.guard import enforce, worker_policy
from codeeval.flows.logs import explain_failures
from codeeval.flows.stages import (EXECUTE, GENERATE, StageFailed, generation_deployment, remote_shard,
                                   use_deployments)
from codeeval.generation import backend_class, devices
from codeeval.pipeline import failures
from codeeval.pipeline.config import RunConfig
from codeeval.pipeline.plan import backend_spec, check, sandbox_spec
from codeeval.pipeline.policy import config_request
from codeeval.pipeline.problems import portable
from codeeval.pipeline.publish import publish, shard_writers
from codeeval.reporting.summary import ShardFailure, failure_message, results_table, summary_line, summary_markdown
from codeeval.tasks.shards import KEPT, SKIPPED, execute_shard, generate_shard, load_problems, score_task, stale

explain_failures()


def run_link(kind: str, run_id: str) -> str:
    """The UI page of a `task-run` or `flow-run` (PREFECT_UI_URL), else the bare id."""
    base = PREFECT_UI_URL.value()
    return f"{base.rstrip('/')}/runs/{kind}/{run_id}" if base else f"{kind} {run_id}"


def _after(previous) -> list:
    return [allow_failure(previous)] if previous is not None else []


def _exec_lanes(name: str, config: RunConfig) -> int:
    """How many of a task's execution shards may run at once: one (a chain), or one per worker
    for an execution that serializes itself (repo-level: a lock per repository)."""
    execution = get_task(name).execution
    if execution is None or not execution.concurrent_shards:
        return 1
    return max(1, config.n_workers or os.cpu_count() or 1)


def _cached(future) -> bool:
    """Reused: a Prefect cache hit, or a file a killed run finished before its cache record."""
    return future.state.name == "Cached" or future.state.message == KEPT


def _run_name() -> str:
    """`<model>-<tasks>-<short run id>` in the UI: readable, and unique per run (two models whose
    directories share a name differ in their run ids). Parameters may arrive as a dict."""
    from prefect.runtime import flow_run

    config = flow_run.parameters.get("config")
    if not isinstance(config, RunConfig):
        config = RunConfig.from_dict(config)
    return f"{Path(config.model).name or config.model}-{'-'.join(config.tasks)}-{config.run_id.rsplit('-', 1)[1][:6]}"


def _shard_failure(task: str, run_name: str, future, root: Path) -> ShardFailure:
    """A failed shard's root cause: its error record (written where it ran, on whichever host),
    else the exception its state holds; and the link to its run."""
    state = future.state
    error = state.result(raise_on_failure=False) if state.is_failed() or state.is_crashed() else None
    stage, _, shard = run_name.partition(f"-{task}-shard-")
    record_path = failures.error_path(root, task, stage, int(shard)) if shard.isdigit() else None
    record = json.loads(storage.fetch(record_path).read_text(encoding="utf-8")) \
        if record_path is not None and storage.fetch(record_path).exists() else {}
    cause = record.get("error") or (failures.root_cause(error) if isinstance(error, BaseException)
                                    else (state.message or state.name))
    link = run_link("flow-run", error.flow_run_id) if isinstance(error, StageFailed) and error.flow_run_id \
        else run_link("task-run", str(future.task_run_id))
    return ShardFailure(task=task, run_name=run_name, cause=cause, log_line=record.get("log_line"), link=link)


# chains bound the real concurrency; the pool only has to hold them all
@flow(name="evaluate", flow_run_name=_run_name, task_runner=ThreadPoolTaskRunner(max_workers=16))
def evaluate(config: RunConfig) -> RunResults:
    try:
        if (policy := worker_policy()) is not None:  # a deployment run: the worker decides (flows/guard.py)
            config = policy.anchored(config)
            enforce(policy, config_request(config), config.run_id)
        return _evaluate(config)
    finally:
        POOL.close()  # the run's sandboxes (every execution shard used them)


def _evaluate(config: RunConfig) -> RunResults:
    log = get_run_logger()
    check(config)
    layout = artifacts.RunLayout(config.run_dir.resolve())
    for partial in files.sweep_partial(layout.root):
        log.info("removed %s, left half-written by a killed run", partial)
    version = code_version()
    backend = backend_spec(config)
    device_specs = devices.plan(backend)  # one spec per visible device (data parallel), or [backend]
    sandbox = sandbox_spec(config)
    # infrastructure errors only (tasks/retries.py; on work pools: a crashed shard run,
    # stages.crashed); a failing model is never retried
    retries = {"retries": config.infra_retries, "retry_delay_seconds": config.retry_delay_s}
    remote = use_deployments(config.stages)  # shards as flow runs on the gpu / cpu work pools
    generate = generation_deployment(backend.kind) if remote else GENERATE
    if remote:
        log.info("shards run on work pools through the %s and %s deployments", generate, EXECUTE)
        device_specs = [backend]  # each gpu host picks its own device; its pool bounds concurrency
    remote_retries = {"infra_retries": config.infra_retries, "retry_delay_s": config.retry_delay_s,
                      "run_id": config.run_id}

    loads = {
        name: load_problems.with_options(task_run_name=f"load-{name}").submit(config, name, str(layout.problems(name)))
        for name in config.tasks
    }
    # every task's input errors before any shard starts: a shard in flight (waiting for a worker
    # of its pool) must not outlive a run that has already failed
    plans: dict[str, PlannedTask] = {name: future.result() for name, future in loads.items()}
    gens, execs, scores = {}, {}, {}
    runs: dict = {}  # task run name -> future, every shard and score
    last_gen: list = [None] * len(device_specs)  # one chain of generation shards per device
    last_exec: list = []  # the execution shards the next task's shards wait for
    # keys name what a shard's output depends on, never where it is: the model's files and a replayed
    # file count by content (`inputs`), so a moved checkout or another host reuses the shards
    portable_backend = replace(backend, model=Path(backend.model).name if Path(backend.model).exists() else backend.model,
                               generations_path=None)
    for name in config.tasks:
        plan = plans[name]
        rows = artifacts.read_rows(Path(plan.problems_path))
        inputs = backend_class(backend.kind).input_fingerprint(backend, get_task(name))
        gens[name], execs[name] = [], []
        lanes = [list(last_exec) for _ in range(_exec_lanes(name, config))]
        for i, (start, stop) in enumerate(plan.shards):
            shard_rows = [portable(r) for r in rows[start:stop]]  # no host path: a moved checkout reuses shards
            gen_path = layout.generations(name, i)
            # the key leaves the device out: outputs do not depend on which device made them
            gen_key = digest("generate", version, name, shard_rows, portable_backend, inputs)
            d = i % len(device_specs)
            run_name = f"generate-{name}-shard-{i:03d}"
            if remote:
                gen = runs[run_name] = remote_shard.with_options(task_run_name=run_name, **retries).submit(
                    generate, run_name, dict(run_name=run_name, name=name, problems_path=plan.problems_path,
                                             start=start, stop=stop, backend=backend, out_path=str(gen_path),
                                             cache_key=gen_key, **remote_retries), gen_key)
            else:
                gen = runs[run_name] = last_gen[d] = generate_shard.with_options(
                    task_run_name=run_name, refresh_cache=stale(str(gen_path)), **retries,
                ).submit(name, plan.problems_path, start, stop, device_specs[d], str(gen_path), gen_key,
                         config.run_id, wait_for=_after(last_gen[d]))
            gens[name].append(gen)
            if config.generation_only or not plan.executes:
                continue
            exec_path = layout.executions(name, i)
            exec_key = digest("execute", version, name, sandbox.name, sandbox.limits)
            run_name = f"execute-{name}-shard-{i:03d}"
            if remote:
                future = runs[run_name] = remote_shard.with_options(task_run_name=run_name, **retries).submit(
                    EXECUTE, run_name, dict(run_name=run_name, name=name, problems_path=plan.problems_path,
                                            sandbox=sandbox, out_path=str(exec_path), cache_key=exec_key,
                                            **remote_retries), exec_key, allow_failure(gen))
            else:
                lane = i % len(lanes)
                future = runs[run_name] = execute_shard.with_options(
                    task_run_name=run_name, refresh_cache=stale(str(exec_path)), **retries,
                ).submit(name, plan.problems_path, allow_failure(gen), sandbox, str(exec_path), exec_key,
                         config.run_id, wait_for=[allow_failure(f) for f in lanes[lane]])
                lanes[lane] = [future]
            execs[name].append(future)
        last_exec = list({id(f): f for lane in lanes for f in lane}.values())
        if not config.generation_only:
            scores[name] = runs[f"score-{name}"] = score_task.with_options(task_run_name=f"score-{name}").submit(
                name, plan.problems_path, list(map(allow_failure, gens[name])), list(map(allow_failure, execs[name])),
                plan.ks, plan.ks_left_out,
                str(layout.metrics(name)))

    for future in runs.values():
        future.wait()
    owner = {run_name: name for name in config.tasks for run_name in runs
             if run_name == f"score-{name}" or f"-{name}-shard-" in run_name}
    failed = [_shard_failure(owner[run_name], run_name, future, layout.root) for run_name, future in runs.items()
              if not future.state.is_completed()]
    skipped = [run_name for run_name, future in runs.items() if future.state.name == SKIPPED]
    scored = {name: f.result() for name, f in scores.items() if f.state.is_completed() and f.state.name != SKIPPED}
    workers = shard_writers(layout, {name: len(plan.shards) for name, plan in plans.items()})
    if (versions := provenance.mixed(workers)) and (failed or skipped):  # else the scores' table says it
        log.warning("%s", versions)
    create_markdown_artifact(
        summary_markdown(config.model, config.run_id, str(layout.root), config.tasks, scored, failed, skipped,
                         versions),
        key=failures.artifact_key("summary", config.run_id),
        description=summary_line(scored, failed))
    if failed or skipped:
        message = failure_message(str(layout.root), failed, skipped)
        log.error("%s", message)
        raise RunFailed(message)

    reuse = {name: Reuse(generate=(sum(map(_cached, gens[name])), len(gens[name])),
                         execute=(sum(map(_cached, execs[name])), len(execs[name])),
                         generate_reused=tuple(i for i, f in enumerate(gens[name]) if _cached(f)))
             for name in config.tasks}
    for name, counts in reuse.items():
        log.info("%s: reused %d/%d generation and %d/%d execution shards from cache", name,
                 *counts.generate, *counts.execute)
    results = publish(config, layout, plans, scored, reuse, version, workers)
    log.info("scores of %s:\n%s", config.model, results_table(results))
    return results

