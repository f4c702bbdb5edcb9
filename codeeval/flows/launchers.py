"""Where the evaluate flow's shards run: `InProcess` (Prefect tasks of this flow run) or `OnWorkPools`
(a flow run per shard on the gpu / cpu work pools: codeeval/flows/stages.py, started and waited for
by codeeval/flows/remote.py). Both take a shard's `ShardId` and its cache key and return the future
of its file; the flow does not know which runs.

In this process, generation shards are dealt round-robin over the visible devices (one model per
device) and run one after another on each; execution shards run one after another (one sandbox
pool), except a task whose execution serializes itself (`Execution.concurrent_shards`: repo-level,
one lock per repository), in one lane per worker. The chains overlap: shard i executes while shard
i+1 generates. On work pools each pool bounds its own concurrency: nothing is chained.
"""
from __future__ import annotations

import os

from prefect import allow_failure, get_run_logger

from codeeval.benchmarks.registry import get_task
from codeeval.core.artifacts import RunLayout
from codeeval.core.contracts import PlannedTask, ShardId
from codeeval.flows.remote import (
    EXECUTE,
    PREDICT,
    TRAIN,
    deployment_needed,
    generation_deployment,
    remote_shard,
    use_deployments,
)
from codeeval.generation.hf import devices
from codeeval.pipeline.config import RunConfig
from codeeval.pipeline.plan import backend_spec, sandbox_spec
from codeeval.tasks.shards import execute_shard, generate_shard, stale
from codeeval.tasks.training import predict_shard, train_task


def _named(shard: ShardId) -> dict:
    """A shard's task run options that name it as the shard from the start: Prefect names a task run
    `<task name>-<3 random characters>` when it creates it (Pending, waiting on its upstream) and
    gives it `task_run_name` only once it starts, so a run graph full of `shard-341` becomes
    `generate-humaneval-shard-003-341` from the start."""
    name = RunLayout.run_name(shard)
    return {"name": name, "task_run_name": name}


class ShardLauncher:
    """Submits a run's shards; `backend` and `sandbox` are what the keys of its shards name."""

    def __init__(self, config: RunConfig, layout: RunLayout):
        self.config, self.layout = config, layout
        self.backend, self.sandbox = backend_spec(config), sandbox_spec(config)
        # infrastructure errors only (tasks/retries.py; on work pools: a crashed shard run,
        # remote.crashed); a failing model is never retried
        self.retries = {"retries": config.infra_retries, "retry_delay_seconds": config.retry_delay_s}

    def generate(self, shard: ShardId, plan: PlannedTask, start: int, stop: int, key: str):
        raise NotImplementedError

    def execute(self, shard: ShardId, plan: PlannedTask, generated, key: str):
        """`generated`: the future of the shard's generations, which may have failed (allow_failure:
        the execution then ends Skipped, under its own name)."""
        raise NotImplementedError

    def train(self, shard: ShardId, plan: PlannedTask, key: str):
        """A classification task's training (the future of its log)."""
        raise NotImplementedError

    def predict(self, shard: ShardId, plan: PlannedTask, start: int, stop: int, trained, key: str):
        """A prediction shard of a classification task; `trained`: the future of its training, None for
        the reference backend (no weights: the gold labels, in this process wherever shards run)."""
        return self._predict(shard, plan, start, stop, trained, key, self.backend, [])

    def _predict(self, shard: ShardId, plan: PlannedTask, start: int, stop: int, trained, key: str,
                 backend, after: list):
        path = self.layout.output(shard)
        return predict_shard.with_options(**_named(shard), refresh_cache=stale(str(path)), **self.retries).submit(
            shard, self.layout, plan.problems_path, start, stop, plan.classes, backend,
            self.config.training, allow_failure(trained) if trained is not None else None, key, self.config.run_id,
            wait_for=after)


def launcher(config: RunConfig, layout: RunLayout) -> ShardLauncher:
    return OnWorkPools(config, layout) if use_deployments(config.stages) else InProcess(config, layout)


def _after(previous) -> list:
    return [allow_failure(previous)] if previous is not None else []


class InProcess(ShardLauncher):
    def __init__(self, config: RunConfig, layout: RunLayout):
        super().__init__(config, layout)
        self.devices = devices.plan(self.backend)  # one spec per visible device (data parallel), or [backend]
        self.last_gen: list = [None] * len(self.devices)  # one chain of generation shards per device
        self.task, self.lanes = None, [[]]  # the current task's execution lanes: the futures each waits for

    def generate(self, shard: ShardId, plan: PlannedTask, start: int, stop: int, key: str):
        d, path = shard.index % len(self.devices), self.layout.output(shard)
        self.last_gen[d] = generate_shard.with_options(
            **_named(shard), refresh_cache=stale(str(path)), **self.retries,
        ).submit(shard, self.layout, plan.problems_path, start, stop, self.devices[d], key,
                 self.config.run_id, wait_for=_after(self.last_gen[d]))
        return self.last_gen[d]

    def execute(self, shard: ShardId, plan: PlannedTask, generated, key: str):
        if shard.task != self.task:  # a task's shards wait for the last execution shards of the task before
            last = list({id(f): f for lane in self.lanes for f in lane}.values())
            self.task, self.lanes = shard.task, [list(last) for _ in range(self._lanes(shard.task))]
        lane, path = shard.index % len(self.lanes), self.layout.output(shard)
        future = execute_shard.with_options(
            **_named(shard), refresh_cache=stale(str(path)), **self.retries,
        ).submit(shard, self.layout, plan.problems_path, allow_failure(generated), self.sandbox, key,
                 self.config.run_id, wait_for=[allow_failure(f) for f in self.lanes[lane]])
        self.lanes[lane] = [future]
        return future

    def train(self, shard: ShardId, plan: PlannedTask, key: str):
        """One training takes every device (data-parallel): it waits for each device's chain, and each
        chain's next shard waits for it."""
        path = self.layout.output(shard)
        future = train_task.with_options(**_named(shard), refresh_cache=stale(str(path)), **self.retries).submit(
            shard, self.layout, plan.splits, plan.classes, self.backend, self.config.training, key,
            self.config.run_id, wait_for=[allow_failure(f) for f in self.last_gen if f is not None])
        self.last_gen = [future] * len(self.devices)
        return future

    def predict(self, shard: ShardId, plan: PlannedTask, start: int, stop: int, trained, key: str):
        d = shard.index % len(self.devices)
        self.last_gen[d] = self._predict(shard, plan, start, stop, trained, key, self.devices[d],
                                         _after(self.last_gen[d]))
        return self.last_gen[d]

    def _lanes(self, name: str) -> int:
        """How many of a task's execution shards may run at once: one (a chain), or one per worker
        for an execution that serializes itself (repo-level: a lock per repository)."""
        execution = get_task(name).execution
        if execution is None or not execution.concurrent_shards:
            return 1
        return max(1, self.config.n_workers or os.cpu_count() or 1)


class OnWorkPools(ShardLauncher):
    def __init__(self, config: RunConfig, layout: RunLayout):
        super().__init__(config, layout)
        self.deployment = generation_deployment(self.backend.kind)  # each gpu host picks its own device
        get_run_logger().info("shards run on work pools through the %s and %s deployments", self.deployment, EXECUTE)
        self.common = {"run_dir": str(layout.root), "infra_retries": config.infra_retries,
                       "retry_delay_s": config.retry_delay_s, "run_id": config.run_id}
        self.checked: set[str] = set()  # the deployments a classification task needs, found on the server

    def generate(self, shard: ShardId, plan: PlannedTask, start: int, stop: int, key: str):
        return remote_shard.with_options(**_named(shard), **self.retries).submit(
            self.deployment, shard, dict(problems_path=plan.problems_path, start=start, stop=stop,
                                         backend=self.backend, cache_key=key, **self.common), key)

    def execute(self, shard: ShardId, plan: PlannedTask, generated, key: str):
        return remote_shard.with_options(**_named(shard), **self.retries).submit(
            EXECUTE, shard, dict(problems_path=plan.problems_path, sandbox=self.sandbox, cache_key=key,
                                 **self.common), key, allow_failure(generated))

    def _needed(self, deployment: str) -> None:
        if deployment not in self.checked:
            deployment_needed(deployment)
            self.checked.add(deployment)

    def train(self, shard: ShardId, plan: PlannedTask, key: str):
        self._needed(TRAIN)
        return remote_shard.with_options(**_named(shard), **self.retries).submit(
            TRAIN, shard, dict(splits=plan.splits, classes=plan.classes, backend=self.backend,
                               args=self.config.training, cache_key=key, **self.common), key)

    def predict(self, shard: ShardId, plan: PlannedTask, start: int, stop: int, trained, key: str):
        if trained is None:
            return super().predict(shard, plan, start, stop, trained, key)
        self._needed(PREDICT)
        return remote_shard.with_options(**_named(shard), **self.retries).submit(
            PREDICT, shard, dict(problems_path=plan.problems_path, start=start, stop=stop, classes=plan.classes,
                                 backend=self.backend, args=self.config.training, cache_key=key, **self.common),
            key, allow_failure(trained))
