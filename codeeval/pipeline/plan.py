"""Checks a RunConfig and plans each task: its problems, samples per problem, ks and shards.

The CLI plans the run before Prefect starts (`plan_run`), so bad input fails in a second with
one line; it hands the plans to the flow (`RunPlans`), whose load stage writes problems.parquet
from them, and plans anew only where nothing was handed over (a deployment's run).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from codeeval.benchmarks.metrics import resolve_ks
from codeeval.benchmarks.registry import get_task
from codeeval.benchmarks.spec import Example, LoadOptions, Problem, TaskSpec
from codeeval.core.errors import UsageError, unknown
from codeeval.core.fingerprint import digest
from codeeval.executors import SANDBOXES, Limits, SandboxSpec
from codeeval.generation import BACKENDS, LOADS_WEIGHTS, BackendSpec, GenerationArgs, backend_class, options
from codeeval.generation.models import model_source
from codeeval.generation.prompts import thinking
from codeeval.pipeline.config import RunConfig


@dataclass(frozen=True)
class TaskPlan:
    spec: TaskSpec
    problems: list[Problem]
    counts: dict[str, int]  # task_id -> samples
    ks: list[int]
    ks_left_out: list[int]
    shards: list[tuple[int, int]]  # [start, stop) into problems
    # a classification task: its training and validation examples, and its class names by label id
    splits: Optional[dict[str, list[Example]]] = None
    classes: tuple[str, ...] = ()

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
        raise UsageError(unknown("backend", config.backend_kind, BACKENDS))
    try:  # the backend reads them through the same table, on a worker, minutes later
        options.parse(config.backend_kind, config.backend_options)
    except options.OptionError as exc:
        raise UsageError(exc.usage) from None
    if config.backend_kind in LOADS_WEIGHTS:
        model_source.resolve(config.model)  # a missing .gguf file or an ambiguous GGUF directory
    if config.executor not in SANDBOXES:
        raise UsageError(unknown("executor", config.executor, SANDBOXES))
    if config.data_dir and not Path(config.data_dir).is_dir():
        raise UsageError(f"data dir not found: {config.data_dir}")
    executing = [name for name in config.tasks if get_task(name).executes]
    if executing and not config.generation_only and not config.allow_code_execution:
        raise UsageError(f"scoring {executing[0]} executes model-generated code: pass --allow_code_execution "
                         "(or --generation_only to only generate)")
    try:
        thinking.parse_tags(config.generation.thinking_tags)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if config.generation.thinking_budget is not None and config.generation.thinking_budget < 0:
        raise UsageError("--thinking_budget must be >= 0")
    if config.generation.reasoning not in thinking.MODES:
        raise UsageError(unknown("reasoning mode", config.generation.reasoning, thinking.MODES))
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
    check_classification(config)


def backend_spec(config: RunConfig, device: Optional[str] = None) -> BackendSpec:
    return BackendSpec(
        kind=config.backend_kind, model=config.model, args=config.generation,
        generations_path=config.load_generations_path, device=device,
        options=tuple(sorted(config.backend_options.items())),
    )


def sandbox_spec(config: RunConfig) -> SandboxSpec:
    return SandboxSpec(config.executor, config.n_workers, Limits(memory_mb=config.memory_mb),
                       container_runtime=config.sandbox_runtime)


def plan_task(config: RunConfig, name: str) -> TaskPlan:
    spec = get_task(name)
    options = LoadOptions(data_dir=Path(config.data_dir) if config.data_dir else None,
                          source_code_root=Path(config.source_code_root) if config.source_code_root else None,
                          dependency_data_root=Path(config.dependency_data_root) if config.dependency_data_root
                          else None, exclude_failing_oracles=config.exclude_failing_oracles,
                          strict_data=config.strict_data, split_seed=config.training.seed)
    if spec.classification is not None:
        return plan_classification(config, spec, options)
    problems = limited(config, name, load_problems(spec, options))
    counts = backend_class(config.backend_kind).counts(backend_spec(config), spec, problems)
    n_min = min(counts.values())
    if config.generation_only or not spec.uses_k:  # --k means nothing to a task without pass@k
        ks, left_out = [], []
    else:
        ks, left_out = resolve_ks(name, n_min, config.k, spec.default_ks)
    shards = shard_ranges(spec, problems, config.shard_size, counts, config.shard_programs)
    return TaskPlan(spec, problems, counts, ks, left_out, shards)


def limited(config: RunConfig, name: str, problems: list[Problem]) -> list[Problem]:
    """The problems --limit_start and --limit keep."""
    stop = None if config.limit is None else config.limit_start + config.limit
    problems = problems[config.limit_start:stop]
    if not problems and config.limit_start == 0:
        raise UsageError(f"task {name}: its data holds no problems")
    if not problems:
        raise UsageError(f"task {name} has no problems in the range --limit_start {config.limit_start} --limit {config.limit}")
    return problems


# GenerationArgs fields that mean nothing to a classification task (it generates nothing)
SAMPLING = ("n_samples", "do_sample", "temperature", "top_p", "top_k", "max_length_generation", "max_new_tokens",
            "prefix", "instruction_tokens", "apply_chat_template", "chat_style", "max_batch_rows", "fim_format",
            "reasoning", "thinking_tags", "thinking_budget", "enable_thinking")
TRAINING_BACKENDS = ("transformers", "reference")  # what fine-tunes a model's weights, and the oracle


def check_classification(config: RunConfig) -> None:
    """The classification tasks' options, and the flags that mean nothing to them, before any data."""
    classifying = [name for name in config.tasks if get_task(name).classification is not None]
    if not classifying:
        return
    first = classifying[0]
    if config.backend_kind not in TRAINING_BACKENDS:
        how = "saved generations" if config.backend_kind == "replay" else f"the {config.backend_kind} backend"
        raise UsageError(f"{first} is evaluated by fine-tuning the model's weights, which {how} cannot do: pass a "
                         "local model directory, a .gguf file or a hub id (or `reference` for the oracle)")
    if config.generation_only:
        raise UsageError(f"--generation_only: {first} generates nothing (it trains, then predicts)")
    if len(classifying) == len(config.tasks):  # every task classifies: a sampling flag can only be a mistake
        default = GenerationArgs()
        given = [f for f in SAMPLING if getattr(config.generation, f) != getattr(default, f)]
        if given:
            raise UsageError(f"--{given[0]} does not apply to {first}, a classification task (one prediction per "
                             "test record, no sampling); its options are the fine-tuning flags (docs/usage.md)")
    if (why := config.training.check()) is not None:
        raise UsageError(f"{first}: {why}")
    for name in classifying:
        class_order(config, name)


def class_order(config: RunConfig, name: str) -> tuple[str, ...]:
    """The task's class names by label id: its own order, or the run's `label_order` (the same names)."""
    classes = get_task(name).classification.classes
    if config.training.label_order is None:
        return classes
    order = tuple(c.strip() for c in config.training.label_order.split(","))
    if sorted(order) != sorted(classes) or len(set(order)) != len(order):
        raise UsageError(f"label_order {config.training.label_order!r} is not an order of {name}'s classes "
                         f"({', '.join(classes)})")
    return order


def plan_classification(config: RunConfig, spec: TaskSpec, options: LoadOptions) -> TaskPlan:
    """The test records as problems (one sample each), the training and validation examples (the
    first max_train_samples / max_eval_samples), and shards of whole evaluation batches."""
    splits = dict(upstream(spec, spec.classification.splits, options))
    problems = limited(config, spec.name, spec.classification.problems(splits.pop("test")))
    a = config.training
    splits = {"train": splits["train"][:a.max_train_samples], "validation": splits["validation"][:a.max_eval_samples]}
    size = max(a.batch_size, config.shard_size // a.batch_size * a.batch_size)
    shards = [(start, min(start + size, len(problems))) for start in range(0, len(problems), size)]
    return TaskPlan(spec, problems, {p.task_id: 1 for p in problems}, [], [], shards, splits,
                    class_order(config, spec.name))


class RunPlans(BaseModel):
    """The plans the CLI made before Prefect started, handed to the `evaluate` flow as a parameter.
    The flow run stores and shows only the config's digest and the tasks' names: plans hold every
    problem, too big for a parameter. A run started from stored parameters (a deployment, the UI's
    retry) has no plans in its process and plans anew, as does one whose config differs (a worker's
    policy anchored it)."""
    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: str = ""  # digest of the RunConfig planned
    tasks: list[str] = []
    plans: dict[str, Any] = Field(default_factory=dict, exclude=True)  # task -> TaskPlan, this process only

    @classmethod
    def of(cls, config: RunConfig, plans: dict[str, TaskPlan]) -> "RunPlans":
        return cls(config=digest(config.to_dict()), tasks=list(plans), plans=dict(plans))

    def take(self, config: RunConfig, name: str) -> Optional[TaskPlan]:
        """This task's plan, once (a later run reads the data again), if made for this very config."""
        return self.plans.pop(name, None) if self.config == digest(config.to_dict()) else None


def plan_run(config: RunConfig) -> dict[str, TaskPlan]:
    """Every task's plan."""
    return {name: plan_task(config, name) for name in config.tasks}


def load_problems(spec: TaskSpec, options: LoadOptions) -> list[Problem]:
    """The task's problems."""
    return upstream(spec, spec.load, options)


def upstream(spec: TaskSpec, load, options: LoadOptions):
    """`load(options)`. The families check the fields they read (codeeval/benchmarks/data.py
    check_fields); a record malformed in a way they do not foresee is still bad input: one line
    naming the task, not a traceback."""
    try:
        return load(options)
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
