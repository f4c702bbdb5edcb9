"""Prefect tasks: thin wrappers that read Parquet, call library code, write Parquet.

Each returns the path it wrote. The flow gives every shard its `ShardId` (the run directory's
RunLayout names its file and its run, `generate-humaneval-shard-003`) and a cache key computed
from the shard's inputs (`cache_key` parameter, codeeval/pipeline/keys.py), so a re-run shows
finished shards as Cached.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Optional

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed

from codeeval.benchmarks.registry import get_task
from codeeval.core import artifacts, memory, provenance, storage
from codeeval.core.artifacts import RunLayout
from codeeval.core.contracts import PlannedTask, ShardId, TaskScore
from codeeval.core.fingerprint import digest, file_digest
from codeeval.core.progress import progress_bar
from codeeval.executors import SandboxSpec
from codeeval.executors.pool import POOL
from codeeval.generation import BackendSpec, open_backend
from codeeval.generation.base import CallContext
from codeeval.pipeline import failures
from codeeval.pipeline.config import RunConfig
from codeeval.pipeline.execute import execute_rows
from codeeval.pipeline.generate import generate_rows
from codeeval.pipeline.plan import TaskPlan, plan_task
from codeeval.pipeline.problems import fingerprint as problems_fingerprint
from codeeval.pipeline.problems import problems_rows, read_problems
from codeeval.pipeline.score import read_samples, score_samples
from codeeval.pipeline.train import split_rows
from codeeval.reporting.view import links
from codeeval.tasks import slots
from codeeval.tasks.retries import retry_condition
from codeeval.tasks.secrets import with_secrets
from codeeval.tasks.skips import skipped

memory.lean_allocators()  # every process that runs shards imports this module: the CLI's, a worker's flow run

KEPT = "kept: written by an earlier run"


def _kept(out_path: str, key: str):
    """The Completed state of a shard whose file an earlier (killed) run finished, else None. A file
    that other code wrote (another version of codeeval, on this host or another) is computed again,
    said in one line: its key is the evaluate run's, which does not know which worker runs the shard."""
    writer = artifacts.written_by(Path(out_path))
    if writer is None:
        return None
    if not provenance.same_code(writer):
        get_run_logger().info("%s", provenance.refusal(out_path, writer))
        return None
    if artifacts.written_with(Path(out_path), key):
        get_run_logger().info("%s already holds this shard's output; kept", out_path)
        return Completed(data=out_path, message=KEPT)
    return None


def stale(out_path: str) -> bool:
    """Whether Prefect's cache record of the shard at `out_path` is not to be trusted (refresh_cache): there
    is no such file, or other code wrote it (then _kept says so, and the shard runs again)."""
    return not provenance.same_code(artifacts.written_by(Path(out_path)))


def content_key(parameters) -> str:
    """What the shard's output depends on (no host path): the flow's key, plus for an execution
    shard the content of its generations file (known only once it exists). Written into the
    shard's Parquet metadata, so that the file is recognised wherever the run directory is now."""
    if "generations_path" not in parameters:
        return parameters["cache_key"]
    upstream = parameters["generations_path"]
    if not isinstance(upstream, str):  # the generation shard failed: this run is skipped, not cached
        return digest(parameters["cache_key"], "upstream failed")
    return digest(parameters["cache_key"], file_digest(storage.fetch(Path(upstream))))


def _prefect_key(context, parameters) -> str:
    """Prefect's result cache holds the output's path: its key names the path too."""
    return digest(content_key(parameters), str(parameters["layout"].output(parameters["shard"])))


class _Forward(logging.Handler):
    """Warnings of codeeval's library loggers, logged in this thread, into the task run's log (the
    library below tasks/ knows nothing of Prefect; the UI shows them beside the shard)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.run_logger = get_run_logger()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.run_logger.log(record.levelno, "%s", record.getMessage())


@contextlib.contextmanager
def _to_run_log() -> Iterator[None]:
    handler, library = _Forward(), logging.getLogger("codeeval")
    library.addHandler(handler)
    try:
        yield
    finally:
        library.removeHandler(handler)


@contextlib.contextmanager
def _reported(shard: ShardId, layout: RunLayout, run_id: str, samples, inputs: dict[str, str]) -> Iterator[None]:
    """A raising shard leaves an error record beside the run's files (its root cause and the last
    warning logged before it) and a markdown artifact on its task run (the same text `codeeval
    inspect` prints); a success clears the record."""
    path = layout.error_record(shard)
    with failures.decisive_log() as warnings, _to_run_log():
        try:
            yield
        except Exception as exc:
            run_name = RunLayout.run_name(shard)
            record = failures.record_error(path, name=shard.task, stage=shard.stage, run_name=run_name, error=exc,
                                           samples=samples(), parquet=str(layout.output(shard)), inputs=inputs,
                                           log_line=warnings[-1] if warnings else None)
            create_markdown_artifact(failures.error_markdown(record),
                                     key=failures.artifact_key("failures", run_name, run_id),
                                     description=f"{run_name}: {record['error']}"[:500])
            raise
    failures.clear_error(path)


@task(name="load", cache_policy=NO_CACHE)
def load_problems(config: RunConfig, name: str, layout: RunLayout, plan: Optional[TaskPlan]) -> PlannedTask:
    """Not cached: loading is cheap, and a changed data file must reach the shard keys. `plan`: the
    CLI's pre-flight one where it handed it over (pipeline/plan.py RunPlans), else made here."""
    plan = plan or plan_task(config, name)
    out_path = str(layout.problems(name))
    artifacts.write_table(Path(out_path), problems_rows(plan.problems, plan.counts),
                          artifacts.PROBLEMS_SCHEMA)
    splits: tuple[tuple[str, str], ...] = ()
    if plan.splits is not None:  # a classification task: the examples it trains on, beside its test records
        splits = tuple((split, str(artifacts.write_table(
            layout.split(name, split), split_rows(examples, plan.spec.classification, plan.classes),
            artifacts.SPLIT_SCHEMA))) for split, examples in plan.splits.items())
        get_run_logger().info("%s: %s examples to train on, %d to test", name,
                              " and ".join(f"{len(e)} {s}" for s, e in plan.splits.items()), len(plan.problems))
    else:
        get_run_logger().info("%s: %d problems, %d samples, %d shards", name, len(plan.problems),
                              sum(plan.counts.values()), len(plan.shards))
    return PlannedTask(name=name, problems_path=out_path, fingerprint=problems_fingerprint(Path(out_path)),
                       n_problems=len(plan.problems), n_samples=sum(plan.counts.values()),
                       shards=tuple(plan.shards), ks=tuple(plan.ks), ks_left_out=tuple(plan.ks_left_out),
                       executes=plan.spec.executes, splits=splits, classes=plan.classes)


@task(name="generate", persist_result=True, cache_key_fn=_prefect_key, retry_condition_fn=retry_condition)
def generate_shard(shard: ShardId, layout: RunLayout, problems_path: str, start: int, stop: int, backend: BackendSpec,
                   cache_key: str, run_id: str = "") -> str:
    out = str(layout.output(shard))
    if kept := _kept(out, cache_key):
        return kept
    problems, counts = read_problems(Path(problems_path))
    mine = problems[start:stop]

    def samples():
        return [(p.task_id, s) for p in mine for s in range(counts[p.task_id])]

    with _reported(shard, layout, run_id, samples, {"problems": problems_path}):
        task_spec = get_task(shard.task)
        total = sum(counts[p.task_id] for p in mine)
        # an API backend journals its answers under the storage (every run there shares them) and says
        # its timeouts and retries in this task run's log
        context = CallContext(journal=storage.root(), say=get_run_logger().warning)
        with progress_bar(total, f"generate {shard.task} {Path(out).stem}") as advance:
            rows = generate_rows(task_spec, problems, mine, counts, open_backend(with_secrets(backend)), advance,
                                 context)
        artifacts.write_table(Path(out), rows, artifacts.GENERATIONS_SCHEMA, key=cache_key,
                              usage=context.usage or None,
                              extra={artifacts.COMPUTE_FIELD: context.compute} if context.compute else None)
    return out


@task(name="execute", persist_result=True, cache_key_fn=_prefect_key,
      retry_condition_fn=retry_condition)
def execute_shard(shard: ShardId, layout: RunLayout, problems_path: str, generations_path: str, sandbox: SandboxSpec,
                  cache_key: str, run_id: str = "") -> str:
    if ends := skipped([(RunLayout.run_name(replace(shard, stage="generate")), generations_path)]):
        return ends
    key = content_key({"cache_key": cache_key, "generations_path": generations_path})
    out = str(layout.output(shard))
    if kept := _kept(out, key):
        return kept
    generations = artifacts.read_rows(Path(generations_path))

    def samples():
        return [(g["task_id"], g["sample"]) for g in generations]

    with _reported(shard, layout, run_id, samples, {"generations": generations_path}):
        task_spec = get_task(shard.task)
        problems, _ = read_problems(Path(problems_path))
        box = POOL.get(replace(sandbox, runtime=task_spec.execution.runtime))  # the task's image
        mine = {g["task_id"] for g in generations}
        with slots.held(task_spec.execution.lock_keys([p for p in problems if p.task_id in mine]),
                        run=RunLayout.run_name(shard), wait_record=layout.wait_record(shard)), \
                progress_bar(len(generations), f"execute {shard.task} {Path(out).stem}") as advance:
            rows = execute_rows(task_spec, problems, generations, box, advance)
        artifacts.write_table(Path(out), rows, artifacts.EXECUTIONS_SCHEMA, key=key,
                              extra={artifacts.SANDBOX_FIELD: box.describe()})
    _report_failures(shard, layout, run_id, rows)
    return out


def _report_failures(shard: ShardId, layout: RunLayout, run_id: str, rows: list[dict]) -> None:
    """A markdown artifact in the Prefect UI listing failing samples with their stderr tails."""
    out = str(layout.output(shard))
    file = Path(out).stem
    statuses = Counter(r["status"] for r in rows)
    get_run_logger().info("%s %s: %s", shard.task, file, ", ".join(f"{k}={v}" for k, v in sorted(statuses.items())))
    site = links.run_site(layout.root)
    text = failures.samples_markdown(shard.task, file, rows, out, view=site and functools.partial(links.href, site))
    if text:
        run_name = RunLayout.run_name(shard)
        create_markdown_artifact(text, key=failures.artifact_key("failures", run_name, run_id),
                                 description=f"failing samples of {run_name}")


@task(name="score")
def score_task(name: str, problems_path: str, generation_paths: list[str], execution_paths: list[str],
               ks: tuple[int, ...], ks_left_out: tuple[int, ...], out_path: str) -> TaskScore:
    """Reads the task's shards, scores them (codeeval/pipeline/score.py), writes metrics.json."""
    task_spec = get_task(name)
    made_by = "predict" if task_spec.classification is not None else "generate"  # a classification task's samples
    inputs = [*((ShardId(name, made_by, i), path) for i, path in enumerate(generation_paths)),
              *((ShardId(name, "execute", i), path) for i, path in enumerate(execution_paths))]
    if ends := skipped([(RunLayout.run_name(shard), path) for shard, path in inputs]):
        return ends
    problems, _ = read_problems(Path(problems_path))
    samples = read_samples(task_spec, problems, generation_paths, execution_paths)
    result = score_samples(task_spec, problems, samples, ks, ks_left_out)
    artifacts.write_json(Path(out_path), result.to_json())
    return result
