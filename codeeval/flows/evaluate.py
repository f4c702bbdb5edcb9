"""The `evaluate` flow: load -> shard -> generate -> execute -> score -> publish.

Each shard runs where the launcher puts it (codeeval/flows/launchers.py: in this process, chained
per device and per sandbox lane, or on the work pools), as a named run whose cache key hashes its
inputs (problems, model, generation args, code version: codeeval/pipeline/keys.py), so a re-run
skips finished shards.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple, Optional

from prefect import allow_failure, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.settings import PREFECT_UI_URL
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import opaque

from codeeval.core import artifacts, files, provenance, storage
from codeeval.core.contracts import PlannedTask, Reuse, ShardId
from codeeval.core.errors import RunFailed
from codeeval.core.fingerprint import code_version
from codeeval.core.results import RunResults
from codeeval.executors.pool import POOL
from codeeval.flows.ending import flow  # prefect.flow, ending Failed with no unnamed result artifact
from codeeval.flows.guard import enforce, worker_policy
from codeeval.flows.launchers import launcher
from codeeval.flows.links import name_own_link
from codeeval.flows.logs import explain_failures
from codeeval.flows.remote import StageFailed
from codeeval.pipeline import failures
from codeeval.pipeline.config import RunConfig
from codeeval.pipeline.keys import shard_keys, training_keys
from codeeval.pipeline.plan import RunPlans, check
from codeeval.pipeline.policy import config_request
from codeeval.pipeline.publish import publish, shard_sandboxes, shard_writers
from codeeval.reporting.summary import (
    ShardFailure,
    failure_headline,
    failure_message,
    results_table,
    summary_line,
    summary_markdown,
)
from codeeval.reporting.view.site import write_run_view
from codeeval.tasks.shards import KEPT, load_problems, score_task
from codeeval.tasks.skips import SKIPPED

explain_failures()


def run_link(kind: str, run_id: str) -> str:
    """The UI page of a `task-run` or `flow-run` (PREFECT_UI_URL), else the bare id."""
    base = PREFECT_UI_URL.value()
    return f"{base.rstrip('/')}/runs/{kind}/{run_id}" if base else f"{kind} {run_id}"


class _Run(NamedTuple):
    """A task run of the flow (a shard or a score) as the UI names it."""
    task: str
    name: str
    future: Any
    shard: Optional[ShardId] = None  # None: the task's score


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
    return f"{Path(config.model).name or config.model}-{'-'.join(config.tasks)}-{config.run_key[:6]}"


def _shard_failure(layout: artifacts.RunLayout, run: _Run) -> ShardFailure:
    """A failed shard's root cause: its error record (written where it ran, on whichever host),
    else the exception its state holds; and the link to its run."""
    state = run.future.state
    error = state.result(raise_on_failure=False) if state.is_failed() or state.is_crashed() else None
    record_path = storage.fetch(layout.error_record(run.shard)) if run.shard is not None else None
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path is not None and record_path.exists() \
        else {}
    cause = record.get("error") or (error.cause if isinstance(error, StageFailed) and error.cause else
                                    failures.root_cause(error) if isinstance(error, BaseException)
                                    else (state.message or state.name))
    link = run_link("flow-run", error.flow_run_id) if isinstance(error, StageFailed) and error.flow_run_id \
        else run_link("task-run", str(run.future.task_run_id))
    return ShardFailure(task=run.task, run_name=run.name, cause=cause, log_line=record.get("log_line"), link=link)


# chains bound the real concurrency; the pool only has to hold them all
@flow(name="evaluate", flow_run_name=_run_name, task_runner=ThreadPoolTaskRunner(max_workers=16))
def evaluate(config: RunConfig, plans: Optional[RunPlans] = None) -> RunResults:
    """`plans`: what the CLI planned before Prefect started (a run from stored parameters has none)."""
    name_own_link()  # the nightly's subflow: its task run there reads as this run, not `evaluate-0`
    try:
        if (policy := worker_policy()) is not None:  # a deployment run: the worker decides (flows/guard.py)
            config = policy.anchored(config)
            enforce(policy, config_request(config), config.run_id)
        return _evaluate(config, plans or RunPlans())
    finally:
        POOL.close()  # the run's sandboxes (every execution shard used them)


def _evaluate(config: RunConfig, handed: RunPlans) -> RunResults:
    log = get_run_logger()
    check(config)
    layout = artifacts.RunLayout(config.run_dir.resolve())
    for partial in files.sweep_partial(layout.root):
        log.info("removed %s, left half-written by a killed run", partial)
    version = code_version()
    loads = {name: load_problems.with_options(name=f"load-{name}", task_run_name=f"load-{name}").submit(
        config, name, layout, opaque(handed.take(config, name)))  # opaque: Prefect need not walk every problem
             for name in config.tasks}
    # every task's input errors before any shard starts: a shard in flight (waiting for a worker
    # of its pool) must not outlive a run that has already failed
    plans: dict[str, PlannedTask] = {name: future.result() for name, future in loads.items()}
    launch = launcher(config, layout)
    gens, execs, trains, scores = {}, {}, {}, {}
    runs: list[_Run] = []  # every shard and score, in the order they were submitted
    for name, plan in plans.items():
        if plan.trains:  # a classification task: train, then predict; its predictions are its samples
            (trains[name], gens[name]), execs[name] = _classify(config, plan, launch, version, runs), []
        else:
            (gens[name], execs[name]), trains[name] = _generate(config, plan, launch, version, runs), []
        if not config.generation_only:
            scores[name] = score_task.with_options(name=f"score-{name}", task_run_name=f"score-{name}").submit(
                name, plan.problems_path, list(map(allow_failure, gens[name])), list(map(allow_failure, execs[name])),
                plan.ks, plan.ks_left_out, str(layout.metrics(name)))
            runs.append(_Run(name, f"score-{name}", scores[name]))

    scored, workers = _outcome(config, layout, plans, runs, scores)
    reuse = {name: _reuse(gens[name], execs[name], trains[name], plans[name].trains) for name in config.tasks}
    for name, counts in reuse.items():
        if plans[name].trains:
            log.info("%s: reused %d/%d trainings and %d/%d prediction shards from cache", name, *counts.train,
                     *counts.predict)
        else:
            log.info("%s: reused %d/%d generation and %d/%d execution shards from cache", name,
                     *counts.generate, *counts.execute)
    shards = {name: len(plan.shards) for name, plan in plans.items()}
    results = publish(config, layout, plans, scored, reuse, version, workers, shard_sandboxes(layout, shards))
    log.info("scores of %s:\n%s", config.model, results_table(results))
    return results


def _generate(config: RunConfig, plan: PlannedTask, launch, version: str, runs: list) -> tuple[list, list]:
    """A task's generation shards and, when it executes, its execution shards."""
    gens, execs = [], []
    for i, ((start, stop), keys) in enumerate(zip(plan.shards, shard_keys(plan, launch.backend, launch.sandbox,
                                                                          version))):
        shard = ShardId(plan.name, "generate", i)
        gens.append(gen := launch.generate(shard, plan, start, stop, keys.generate))
        runs.append(_Run(plan.name, artifacts.RunLayout.run_name(shard), gen, shard))
        if not config.generation_only and plan.executes:
            shard = ShardId(plan.name, "execute", i)
            execs.append(future := launch.execute(shard, plan, gen, keys.execute))
            runs.append(_Run(plan.name, artifacts.RunLayout.run_name(shard), future, shard))
    return gens, execs


def _classify(config: RunConfig, plan: PlannedTask, launch, version: str, runs: list) -> tuple[list, list]:
    """A classification task's training (none for the reference backend) and prediction shards."""
    train_key, predict_keys = training_keys(plan, launch.backend, config.training, version)
    trained = None
    if launch.backend.kind != "reference":
        shard = ShardId(plan.name, "train", 0)
        trained = launch.train(shard, plan, train_key)
        runs.append(_Run(plan.name, artifacts.RunLayout.run_name(shard), trained, shard))
    predictions = []
    for i, ((start, stop), key) in enumerate(zip(plan.shards, predict_keys)):
        shard = ShardId(plan.name, "predict", i)
        predictions.append(future := launch.predict(shard, plan, start, stop, trained, key))
        runs.append(_Run(plan.name, artifacts.RunLayout.run_name(shard), future, shard))
    return [trained] if trained is not None else [], predictions


def _reuse(gens: list, execs: list, trains: list, classifies: bool) -> Reuse:
    """The shards of a task taken from the cache, per stage (a classification task's predictions
    stand where generations stand, and count as predictions)."""
    if classifies:
        return Reuse(generate=(0, 0), execute=(0, 0), train=(sum(map(_cached, trains)), len(trains)),
                     predict=(sum(map(_cached, gens)), len(gens)))
    return Reuse(generate=(sum(map(_cached, gens)), len(gens)), execute=(sum(map(_cached, execs)), len(execs)),
                 generate_reused=tuple(i for i, f in enumerate(gens) if _cached(f)))


def _write_view(config: RunConfig, layout: artifacts.RunLayout) -> None:
    """Every sample of the run, whole or failed, as a page (codeeval/reporting/view/): what the
    shards' artifacts link to. A view that cannot be written is a warning, never the run's failure."""
    try:
        write_run_view(layout.root, config.model, config.run_id)
    except Exception as exc:  # noqa: BLE001 - the scores stand without their page
        get_run_logger().warning("the run's view was not written: %s", failures.root_cause(exc))


def _outcome(config: RunConfig, layout: artifacts.RunLayout, plans: dict[str, PlannedTask], runs: list[_Run],
             scores: dict) -> tuple[dict, list]:
    """Waits for every run; the scores and the shards' writers, once the summary artifact is made;
    RunFailed when a shard failed or was skipped, with each failed shard's root cause."""
    for run in runs:
        run.future.wait()
    POOL.close(wait=False)  # every execution has ended: the containers go while the summary is written
    _write_view(config, layout)
    failed = [_shard_failure(layout, run) for run in runs if not run.future.state.is_completed()]
    skipped = [run.name for run in runs if run.future.state.name == SKIPPED]
    scored = {name: f.result() for name, f in scores.items() if f.state.is_completed() and f.state.name != SKIPPED}
    workers = shard_writers(layout, {name: len(plan.shards) for name, plan in plans.items()})
    if (versions := provenance.mixed(workers)) and (failed or skipped):  # else the scores' table says it
        get_run_logger().warning("%s", versions)
    create_markdown_artifact(
        summary_markdown(config.model, config.run_id, str(layout.root), config.tasks, scored, failed, skipped,
                         versions),
        key=failures.artifact_key("summary", config.run_id),
        description=summary_line(scored, failed))
    if failed or skipped:  # the causes once, in the line Prefect logs for the exception (flows/logs.py)
        raise RunFailed(failure_message(str(layout.root), failed, skipped), failure_headline(failed, skipped))
    return scored, workers
