"""results.json and the leaderboard's rows as types, so that no reader spells their keys.

results.json keeps bigcode's shape, byte for byte: each task's metric dict at the top level, its flat
`config`, then codeeval's own block (`RunResults.to_json` / `from_json` are each other's inverse on
every file this version writes; tests/test_results.py reads the release's own files). The
leaderboard's Parquet schema is derived from `LeaderboardRow`'s fields: one place names a column.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import pyarrow as pa

from codeeval.core.contracts import Reuse


def reuse_json(reuse: Reuse) -> dict:
    """results.json's `reused`: {"generate": [reused, all], "execute": [reused, all]} shards; a
    classification task's {"train": [reused, 1], "predict": [reused, all]} instead."""
    if reuse.train[1] or reuse.predict[1]:
        return {"train": list(reuse.train), "predict": list(reuse.predict)}
    return {"generate": list(reuse.generate), "execute": list(reuse.execute)}


@dataclass(frozen=True, kw_only=True)
class TaskSummary:
    """results.json's `codeeval.tasks.<task>`: counts, the score's summary (none for a task that was
    only generated), the shards reused, what generating through an API cost, the saved generations."""

    problems: Optional[int] = None
    samples: Optional[int] = None
    ks_left_out: tuple[int, ...] = ()
    primary: Optional[str] = None  # the headline metric; None: not scored (generation only)
    higher_is_better: bool = True
    passed: Optional[int] = None  # samples that passed; None for a task without pass/fail
    statuses: dict[str, int] = field(default_factory=dict)
    # per float metric, over problems (codeeval/pipeline/uncertainty.py): standard error, 95% interval, method
    stderr: dict[str, float] = field(default_factory=dict)
    ci95: dict[str, list[float]] = field(default_factory=dict)
    stderr_method: dict[str, str] = field(default_factory=dict)
    shards: int = 0
    reused: Reuse = Reuse(generate=(0, 0), execute=(0, 0))  # (reused, all) shards per stage
    api: Optional[dict[str, Any]] = None  # codeeval/pipeline/usage.py's task_usage (its shape lives there)
    compute: Optional[dict[str, Any]] = None  # codeeval/pipeline/usage.py's task_compute (per shard, and summed)
    thinking: Optional[dict[str, Any]] = None  # codeeval/pipeline/usage.py's task_thinking
    saved_generations: Optional[str] = None

    @property
    def scored(self) -> bool:
        return self.primary is not None

    def to_json(self) -> dict:
        if self.scored:  # TaskScore's order (core/contracts.py), as results.json has it
            data = {"primary": self.primary, "higher_is_better": self.higher_is_better, "problems": self.problems,
                    "samples": self.samples, "passed": self.passed, "statuses": self.statuses,
                    "ks_left_out": list(self.ks_left_out), "stderr": self.stderr, "ci95": self.ci95,
                    "stderr_method": self.stderr_method}
        else:
            data = {"problems": self.problems, "samples": self.samples, "ks_left_out": list(self.ks_left_out)}
        data.update(shards=self.shards, reused=reuse_json(self.reused))
        if self.api:
            data["api"] = self.api
        if self.compute:
            data["compute"] = self.compute
        if self.thinking:
            data["thinking"] = self.thinking
        if self.saved_generations:
            data["saved_generations"] = self.saved_generations
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TaskSummary":
        """Any key may be missing (a results.json of an older version, or one written by hand)."""
        reused = data.get("reused") or {}
        known = {f.name for f in dataclasses.fields(cls)} - {"ks_left_out", "reused"}
        return cls(**{k: v for k, v in data.items() if k in known},
                   ks_left_out=tuple(data.get("ks_left_out") or ()),
                   reused=Reuse(generate=tuple(reused.get("generate") or (0, 0)),
                                execute=tuple(reused.get("execute") or (0, 0)),
                                train=tuple(reused.get("train") or (0, 0)),
                                predict=tuple(reused.get("predict") or (0, 0))))


@dataclass(frozen=True, kw_only=True)
class RunResults:
    """A run's results.json. `metrics` and `tasks` keep their own orders (the scored tasks, and every
    planned task); a results.json written by bigcode itself has no codeeval block (run_id None)."""

    metrics: dict[str, Any]  # task -> bigcode's result dict (values may be non-scalar), at the top level
    config: dict[str, Any]  # bigcode's flat argument namespace (codeeval/pipeline/publish.py bigcode_config)
    run_id: Optional[str] = None
    run_dir: Optional[str] = None
    code_version: Optional[str] = None
    # who wrote the shards (core/provenance.py group): version, code fingerprint, host, home, their shards;
    # and mixed's line when their code differs. Absent in files written before they were recorded.
    codeeval_version: Optional[str] = None
    workers: list[dict[str, Any]] = field(default_factory=list)
    mixed_versions: Optional[str] = None
    # where the execution shards ran (pipeline/publish.py shard_sandboxes): executor, image, runtime, shards
    sandboxes: list[dict[str, Any]] = field(default_factory=list)
    tasks: dict[str, TaskSummary] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.config.get("model", "?")

    def task(self, name: str) -> TaskSummary:
        """The task's summary; an empty one where the file has none (bigcode's own results.json)."""
        return self.tasks.get(name) or TaskSummary()

    def primary(self, task: str) -> Optional[str]:
        """The task's headline metric: what results.json names, else pass@1, else its first number."""
        metrics = self.metrics.get(task)
        if not isinstance(metrics, dict):
            return None
        numeric = [m for m, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        for candidate in (self.task(task).primary, "pass@1"):
            if candidate in numeric:
                return candidate
        return numeric[0] if numeric else None

    def to_json(self) -> dict:
        data: dict[str, Any] = {**self.metrics, "config": self.config}
        if self.run_id is not None or self.tasks:
            provenance = {"codeeval_version": self.codeeval_version, "workers": self.workers or None,
                          "mixed_versions": self.mixed_versions, "sandboxes": self.sandboxes or None}
            data["codeeval"] = {"run_id": self.run_id, "run_dir": self.run_dir, "code_version": self.code_version,
                                **{k: v for k, v in provenance.items() if v is not None},
                                "tasks": {name: summary.to_json() for name, summary in self.tasks.items()}}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunResults":
        info = data.get("codeeval") or {}
        return cls(metrics={k: v for k, v in data.items() if k not in ("config", "codeeval")},
                   config=dict(data.get("config") or {}), run_id=info.get("run_id"), run_dir=info.get("run_dir"),
                   code_version=info.get("code_version"), codeeval_version=info.get("codeeval_version"),
                   workers=list(info.get("workers") or []), mixed_versions=info.get("mixed_versions"),
                   sandboxes=list(info.get("sandboxes") or []),
                   tasks={name: TaskSummary.from_json(s) for name, s in (info.get("tasks") or {}).items()})


@dataclass(frozen=True, kw_only=True)
class LeaderboardRow:
    """One row of leaderboard.parquet (long form: model x task x metric). Its fields, in order, are
    the Parquet columns (LEADERBOARD_SCHEMA); a failed model's placeholder row has no metric."""

    model: str
    task: str
    metric: Optional[str] = None
    value: Optional[float] = None
    primary: bool = True
    problems: Optional[int] = None
    # the value's uncertainty over problems (docs/statistics.md): standard error, 95% interval, how computed
    stderr: Optional[float] = None
    ci95_low: Optional[float] = None
    ci95_high: Optional[float] = None
    stderr_method: Optional[str] = None
    run_id: Optional[str] = None
    date: str
    run_dir: Optional[str] = None  # the run's directory (results.json; its shards, rewritten when they change)
    # the night's own copy of the run's problems/generations/executions Parquet (the paired comparisons
    # read it), relative to the leaderboard folder: samples/<night>/<run_id> (reporting/paired.py)
    samples: Optional[str] = None
    # the night's view of that copy (`codeeval view`'s site), relative to the leaderboard folder:
    # views/<night>/<run_id> (reporting/view/nights.py; the page's cells and flips link into it); null before views
    view: Optional[str] = None
    error: Optional[str] = None  # a model whose run failed tonight: its root cause (its rows are older, or empty)
    # what the task's generations rest on through an API (results.json's `api`: every answer, sent or journaled);
    # null for a backend that loads weights, and in leaderboards written before these columns
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None

    def to_row(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "LeaderboardRow":
        """A Parquet row; a column an older leaderboard lacks is None."""
        return cls(**{f.name: row[f.name] for f in dataclasses.fields(cls) if f.name in row})


ARROW_TYPES = {str: pa.string(), float: pa.float64(), int: pa.int64(), bool: pa.bool_()}


def arrow_schema(cls: type) -> pa.Schema:
    """A flat dataclass's Parquet schema: a column per field, in order, each nullable."""
    hints = typing.get_type_hints(cls)

    def arrow(hint: Any) -> pa.DataType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return ARROW_TYPES[args[0] if typing.get_origin(hint) is typing.Union else hint]

    return pa.schema([(f.name, arrow(hints[f.name])) for f in dataclasses.fields(cls)])


LEADERBOARD_SCHEMA = arrow_schema(LeaderboardRow)
