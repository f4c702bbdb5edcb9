"""Typed contracts between the stages (the flow passes these, not dicts whose keys five
modules must agree on). Frozen and picklable: Prefect persists them as task results."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional


STAGES = ("generate", "execute", "train", "predict")  # a classification task trains and predicts instead


@dataclass(frozen=True)
class ShardId:
    """One shard of a task at one stage (generate, execute; train, a task's one training, and predict):
    what the flow, the tasks and the work-pool flow runs pass. Its run name and its files are given by `artifacts.RunLayout`, and
    nothing reads a shard back out of a name."""

    task: str
    stage: str
    index: int

    def __post_init__(self) -> None:
        if self.stage not in STAGES:  # a flow run's parameter: it names a folder and a file
            raise ValueError(f"a shard's stage is one of {', '.join(STAGES)}, not {self.stage!r}")


@dataclass(frozen=True)
class PlannedTask:
    """What the load stage hands the flow for one task."""

    name: str
    problems_path: str
    fingerprint: str  # sha256 of problems.parquet (run.json's data fingerprint)
    n_problems: int
    n_samples: int
    shards: tuple[tuple[int, int], ...]  # [start, stop) into the problems
    ks: tuple[int, ...]
    ks_left_out: tuple[int, ...]
    executes: bool  # False: no execute shards, scored from the completions
    # a classification task: its training and validation splits' files ((split, path), ...) and its
    # class names by label id; it trains and predicts instead of generating
    splits: tuple[tuple[str, str], ...] = ()
    classes: tuple[str, ...] = ()

    @property
    def trains(self) -> bool:
        return bool(self.splits)

    def split_path(self, name: str) -> str:
        return dict(self.splits)[name]


@dataclass(frozen=True)
class Reuse:
    """Shards of a task taken from the cache, out of all (generation, execution)."""

    generate: tuple[int, int]
    execute: tuple[int, int]
    generate_reused: tuple[int, ...] = ()  # which generation shards (their indices) were reused
    train: tuple[int, int] = (0, 0)  # a classification task's training, and its prediction shards
    predict: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class TaskScore:
    """What the score stage returns; metrics.json holds it."""

    metrics: dict[str, Any]  # bigcode's result dict for the task (values may be non-scalar)
    primary: str  # the headline key of `metrics` (the leaderboard's column)
    higher_is_better: bool
    problems: int
    samples: int
    passed: Optional[int]  # samples that passed; None for a task without pass/fail
    statuses: dict[str, int]
    ks_left_out: tuple[int, ...]
    # per float of `metrics`, over problems (codeeval/pipeline/uncertainty.py): standard error, 95% interval, method
    stderr: dict[str, float] = field(default_factory=dict)
    ci95: dict[str, list[float]] = field(default_factory=dict)
    stderr_method: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["ks_left_out"] = list(self.ks_left_out)
        return data
