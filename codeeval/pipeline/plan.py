"""Checks a RunConfig and plans each task: its problems, samples per problem, ks and shards.

The CLI plans the run before Prefect starts (`plan_run`), so bad input fails in a second with
one line; the flow's load stage, in the same process, takes that plan to write problems.parquet
(`planned`), and plans anew only where nothing planned before it (a deployment's run).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from codeeval.benchmarks.metrics import resolve_ks
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import LoadOptions, Problem, TaskSpec
from codeeval.core.errors import UsageError
from codeeval.core.fingerprint import digest
from codeeval.executors import SANDBOXES, Limits, SandboxSpec
from codeeval.generation import BACKENDS, LOADS_WEIGHTS, BackendSpec, backend_class, model_source, options
from codeeval.pipeline.config import RunConfig


@dataclass(frozen=True)
class TaskPlan:
    spec: TaskSpec
    problems: list[Problem]
    counts: dict[str, int]  # task_id -> samples
    ks: list[int]
    ks_left_out: list[int]
    shards: list[tuple[int, int]]  # [start, stop) into problems

    @property
    def n_min(self) -> int:
        return min(self.counts.values(), default=0)


def check(config: RunConfig) -> None:
    """Input errors that need no data: unknown task/backend/executor, missing data dir, flags."""
    if not config.tasks:
        raise UsageError("no task given (--tasks humaneval,mbpp; `codeeval tasks` lists them)")
    for name in config.tasks:
        get_task(name)
    if len(set(config.tasks)) != len(config.tasks):
        raise UsageError("a task is listed twice in --tasks")
    if config.backend_kind not in BACKENDS:
        raise UsageError(f"unknown backend {config.backend_kind!r}; choose from {', '.join(BACKENDS)}")
    try:  # the backend reads them through the same table, on a worker, minutes later
        options.parse(config.backend_kind, config.backend_options)
    except options.OptionError as exc:
        raise UsageError(exc.usage) from None
    if config.backend_kind in LOADS_WEIGHTS:
        model_source.resolve(config.model)  # a missing .gguf file or an ambiguous GGUF directory
    if config.executor not in SANDBOXES:
        raise UsageError(f"unknown executor {config.executor!r}; choose from {', '.join(SANDBOXES)}")
    if config.data_dir and not Path(config.data_dir).is_dir():
        raise UsageError(f"data dir not found: {config.data_dir}")
    executing = [name for name in config.tasks if get_task(name).executes]
    if executing and not config.generation_only and not config.allow_code_execution:
        raise UsageError(f"scoring {executing[0]} executes model-generated code: pass --allow_code_execution "
                         "(or --generation_only to only generate)")
    if config.generation.n_samples < 1:
        raise UsageError("--n_samples must be >= 1")
    if config.limit is not None and config.limit < 1:
        raise UsageError("--limit must be >= 1")
    if config.limit_start < 0:
        raise UsageError("--limit_start must be >= 0")
    if config.shard_size < 1:
        raise UsageError("--shard_size must be >= 1")
    if config.shard_programs < 1:
        raise UsageError("--shard_programs must be >= 1")
    if config.stages not in ("auto", "local", "deployments"):
        raise UsageError(f"stages must be auto, local or deployments, not {config.stages!r}")


def backend_spec(config: RunConfig, device: Optional[str] = None) -> BackendSpec:
    return BackendSpec(
        kind=config.backend_kind, model=config.model, args=config.generation,
        generations_path=config.load_generations_path, device=device,
        options=tuple(sorted(config.backend_options.items())),
    )


def sandbox_spec(config: RunConfig) -> SandboxSpec:
    return SandboxSpec(config.executor, config.n_workers, Limits(memory_mb=config.memory_mb))


def plan_task(config: RunConfig, name: str) -> TaskPlan:
    spec = get_task(name)
    options = LoadOptions(data_dir=Path(config.data_dir) if config.data_dir else None,
                          source_code_root=Path(config.source_code_root) if config.source_code_root else None,
                          dependency_data_root=Path(config.dependency_data_root) if config.dependency_data_root
                          else None, exclude_failing_oracles=config.exclude_failing_oracles,
                          strict_data=config.strict_data)
    problems = load_problems(spec, options)
    stop = None if config.limit is None else config.limit_start + config.limit
    problems = problems[config.limit_start:stop]
    if not problems and config.limit_start == 0:
        raise UsageError(f"task {name}: its data holds no problems")
    if not problems:
        raise UsageError(f"task {name} has no problems in the range --limit_start {config.limit_start} --limit {config.limit}")
    counts = backend_class(config.backend_kind).counts(backend_spec(config), spec, problems)
    n_min = min(counts.values())
    if config.generation_only or not spec.uses_k:  # --k means nothing to a task without pass@k
        ks, left_out = [], []
    else:
        ks, left_out = resolve_ks(name, n_min, config.k, spec.default_ks)
    shards = shard_ranges(spec, problems, config.shard_size, counts, config.shard_programs)
    return TaskPlan(spec, problems, counts, ks, left_out, shards)


_PLANNED: dict[tuple[str, str], TaskPlan] = {}  # (config digest, task) -> the pre-flight plan, taken once


def plan_run(config: RunConfig) -> dict[str, TaskPlan]:
    """Every task's plan, kept for this process's load stage (`planned`)."""
    plans = {name: plan_task(config, name) for name in config.tasks}
    _PLANNED.update({(digest(config.to_dict()), name): plan for name, plan in plans.items()})
    return plans


def planned(config: RunConfig, name: str) -> TaskPlan:
    """The plan `plan_run` made for this very config in this process, once (a later run of the
    same config reads its data again), else a new one."""
    return _PLANNED.pop((digest(config.to_dict()), name), None) or plan_task(config, name)


def load_problems(spec: TaskSpec, options: LoadOptions) -> list[Problem]:
    """The task's problems. The families check the fields they read (codeeval/benchmarks/data.py
    check_fields); a record malformed in a way they do not foresee is still bad input: one line
    naming the task, not a traceback."""
    try:
        return spec.load(options)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise UsageError(f"task {spec.name}: its data is not in the upstream format ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:120]})") from None


def _no_key(problem: Problem) -> None:
    return None


def shard_ranges(spec: TaskSpec, problems: list[Problem], size: int, counts: Optional[dict[str, int]] = None,
                 max_programs: Optional[int] = None) -> list[tuple[int, int]]:
    """[start, stop) ranges of at most `size` problems and, with `counts`, at most `max_programs`
    samples (a problem is never split: one with more samples is a shard alone), so that a shard's
    memory and the work a kill loses stay bounded whatever n_samples is; a task whose execution
    has a shard key (repo-level: the repository) also starts a new shard wherever the key changes."""
    key = spec.execution.shard_key if spec.execution is not None else _no_key
    samples = (lambda p: counts[p.task_id]) if counts and max_programs else (lambda p: 0)
    shards, start, held = [], 0, 0
    for i in range(1, len(problems) + 1):
        held += samples(problems[i - 1])
        if (i == len(problems) or i - start == size or key(problems[i]) != key(problems[start])
                or (max_programs and held + samples(problems[i]) > max_programs)):
            shards.append((start, i))
            start, held = i, 0
    return shards
