"""Prefect tasks: thin wrappers that read Parquet, call library code, write Parquet.

Each returns the path it wrote. The flow gives every call a cache key computed from
the shard's inputs (`cache_key` parameter) and a run name like
`generate-humaneval-shard-003`, so a re-run shows finished shards as Cached.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.states import Completed

from codeeval import artifacts
from codeeval.benchmarks.registry import get_task
from codeeval.config import RunConfig
from codeeval.contracts import PlannedTask, TaskScore
from codeeval.execute import execute_rows
from codeeval.executors import SandboxSpec
from codeeval.executors.pool import POOL
from codeeval.fingerprint import digest, file_digest
from codeeval.generate import generate_rows
from codeeval.generation import BackendSpec, open_backend
from codeeval.plan import plan_task
from codeeval.progress import progress_bar
from codeeval.score import samples_of, score_samples


KEPT = "kept: written by an earlier run"


def _kept(out_path: str, key: str):
    """The Completed state of a shard whose file an earlier (killed) run finished, else None."""
    if artifacts.written_with(Path(out_path), key):
        get_run_logger().info("%s already holds this shard's output; kept", out_path)
        return Completed(data=out_path, message=KEPT)
    return None


def _given_key(context, parameters) -> str:
    return parameters["cache_key"]


def _key_with_input_file(context, parameters) -> str:
    """The flow's key plus the content of the upstream file (known only once it exists)."""
    return digest(parameters["cache_key"], file_digest(Path(parameters["generations_path"])))


@task(name="load")
def load_problems(config: RunConfig, name: str, out_path: str) -> PlannedTask:
    """Not cached: loading is cheap, and a changed data file must reach the shard keys."""
    plan = plan_task(config, name)
    artifacts.write_table(Path(out_path), artifacts.problems_rows(plan.problems, plan.counts),
                          artifacts.PROBLEMS_SCHEMA)
    get_run_logger().info("%s: %d problems, %d samples, %d shards", name, len(plan.problems),
                          sum(plan.counts.values()), len(plan.shards))
    return PlannedTask(name=name, problems_path=out_path, fingerprint=file_digest(Path(out_path)),
                       n_problems=len(plan.problems), n_samples=sum(plan.counts.values()),
                       shards=tuple(plan.shards), ks=tuple(plan.ks), ks_left_out=tuple(plan.ks_left_out),
                       executes=plan.spec.executes)


@task(name="generate", persist_result=True, cache_key_fn=_given_key)
def generate_shard(name: str, problems_path: str, start: int, stop: int, backend: BackendSpec,
                   out_path: str, cache_key: str) -> str:
    if kept := _kept(out_path, cache_key):
        return kept
    task_spec = get_task(name)
    problems, counts = artifacts.read_problems(Path(problems_path))
    shard = problems[start:stop]
    total = sum(counts[p.task_id] for p in shard)
    with progress_bar(total, f"generate {name} {Path(out_path).stem}") as advance:
        rows = generate_rows(task_spec, problems, shard, counts, open_backend(backend), advance)
    artifacts.write_table(Path(out_path), rows, artifacts.GENERATIONS_SCHEMA, key=cache_key)
    return out_path


@task(name="execute", persist_result=True, cache_key_fn=_key_with_input_file)
def execute_shard(name: str, problems_path: str, generations_path: str, sandbox: SandboxSpec,
                  out_path: str, cache_key: str) -> str:
    key = _key_with_input_file(None, {"cache_key": cache_key, "generations_path": generations_path})
    if kept := _kept(out_path, key):
        return kept
    task_spec = get_task(name)
    problems, _ = artifacts.read_problems(Path(problems_path))
    generations = artifacts.read_rows(Path(generations_path))
    with progress_bar(len(generations), f"execute {name} {Path(out_path).stem}") as advance:
        rows = execute_rows(task_spec, problems, generations, POOL.get(dataclasses.replace(sandbox, runtime=task_spec.execution.runtime)),
                            advance)
    artifacts.write_table(Path(out_path), rows, artifacts.EXECUTIONS_SCHEMA, key=key)
    _report_failures(name, Path(out_path).stem, rows)
    return out_path


def _report_failures(name: str, shard: str, rows: list[dict], shown: int = 20) -> None:
    """A markdown artifact in the Prefect UI listing failing samples with their stderr tails."""
    failed = [r for r in rows if r["passed"] is False]
    statuses = Counter(r["status"] for r in rows)
    get_run_logger().info("%s %s: %s", name, shard, ", ".join(f"{k}={v}" for k, v in sorted(statuses.items())))
    if not failed:
        return
    lines = [f"# {name} {shard}: {len(failed)} of {len(rows)} samples failed", ""]
    for r in failed[:shown]:
        err = (r["stderr_tail"] or r["detail"]).strip().splitlines()[-3:]
        lines += [f"## {r['task_id']} sample {r['sample']}: {r['status']} ({r['detail']})", "```", *err, "```", ""]
    if len(failed) > shown:
        lines.append(f"... and {len(failed) - shown} more (executions parquet has them all)")
    key = "failures-" + "".join(c if c.isalnum() else "-" for c in f"{name}-{shard}".lower())
    create_markdown_artifact("\n".join(lines), key=key, description=f"failing samples of {name} {shard}")


@task(name="score")
def score_task(name: str, problems_path: str, generation_paths: list[str], execution_paths: list[str],
               ks: tuple[int, ...], ks_left_out: tuple[int, ...], out_path: str) -> TaskScore:
    """Reads the task's shards, scores them (codeeval/score.py), writes metrics.json."""
    problems, _ = artifacts.read_problems(Path(problems_path))
    generations = [r for path in generation_paths for r in artifacts.read_rows(Path(path))]
    executions = [r for path in execution_paths for r in artifacts.read_rows(Path(path))]
    task_spec = get_task(name)
    samples = samples_of(problems, generations, executions if task_spec.executes else None)
    result = score_samples(task_spec, problems, samples, ks, ks_left_out)
    artifacts.write_json(Path(out_path), result.to_json())
    return result
