"""The cache keys of a task's shards: what a shard's output depends on, never where it is.

A generation shard's key hashes its problems (without host paths), the backend (the model by
name when it is a local directory, without the device and without a replayed file's path: the
model's files and a replayed file count by content, `inputs`) and the code version; an execution
shard's, the sandbox and its limits (the generations it runs are added by the task, by content,
once they exist: tasks/shards.py content_key). So a moved checkout, another host or another
device reuses the shards.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from codeeval.benchmarks.registry import get_task
from codeeval.core import artifacts
from codeeval.core.contracts import PlannedTask
from codeeval.core.fingerprint import digest, file_digest
from codeeval.executors import SandboxSpec
from codeeval.generation import BackendSpec, backend_class
from codeeval.pipeline.problems import portable
from codeeval.training.args import TrainArgs


@dataclass(frozen=True)
class ShardKeys:
    generate: str
    execute: str


def shard_keys(plan: PlannedTask, backend: BackendSpec, sandbox: SandboxSpec, version: str) -> list[ShardKeys]:
    """The keys of each of the task's shards, in the order of `plan.shards`."""
    rows = artifacts.read_rows(Path(plan.problems_path))
    inputs = backend_class(backend.kind).input_fingerprint(backend, get_task(plan.name))
    portable_backend = replace(backend, model=Path(backend.model).name if Path(backend.model).exists() else backend.model,
                               generations_path=None)
    execute = digest("execute", version, plan.name, sandbox.name, sandbox.limits)
    return [ShardKeys(generate=digest("generate", version, plan.name, [portable(r) for r in rows[start:stop]],
                                      portable_backend, inputs),
                      execute=execute)
            for start, stop in plan.shards]


def training_keys(plan: PlannedTask, backend: BackendSpec, args: TrainArgs, version: str) -> tuple[str, list[str]]:
    """A classification task's keys: its training's (the examples it trains on, the model by name and
    by its files, the class order, every option that changes the weights; not how many checkpoints are
    kept) and each prediction shard's (its test records, the training's key, how they are batched)."""
    rows = artifacts.read_rows(Path(plan.problems_path))
    inputs = backend_class(backend.kind).input_fingerprint(backend, get_task(plan.name))
    model = (Path(backend.model).name if Path(backend.model).exists() else backend.model, backend.kind,
             backend.args.revision, backend.args.trust_remote_code, inputs)
    weights = replace(args, keep_checkpoints=TrainArgs.keep_checkpoints)
    train = digest("train", version, plan.name, [file_digest(Path(path)) for _, path in plan.splits], model,
                   plan.classes, weights)
    return train, [digest("predict", version, plan.name, [portable(r) for r in rows[start:stop]], train,
                          args.batch_size, args.max_length, plan.classes)
                   for start, stop in plan.shards]
