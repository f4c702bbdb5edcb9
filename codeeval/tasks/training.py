"""Prefect tasks of a classification task: its training (`train-codecomplex`) and its prediction shards
(`predict-codecomplex-shard-000`), with the shards' cache, retries, error records and progress.

A training is one task run: its cache key names the model, the examples and every option that
changes the weights, so a finished one is never redone, and its checkpoints (one per epoch, in the
run's storage) carry the key, so a killed one resumes where its last finished checkpoint left it.
"""
from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Callable, Iterator, Optional

from prefect import get_run_logger, task

from codeeval.benchmarks.registry import get_task
from codeeval.core import artifacts, storage
from codeeval.core.artifacts import RunLayout
from codeeval.core.contracts import ShardId
from codeeval.core.progress import progress_bar
from codeeval.generation import BackendSpec
from codeeval.pipeline.problems import read_problems
from codeeval.pipeline.train import predict_rows, train
from codeeval.tasks.retries import retry_condition
from codeeval.tasks.shards import _kept, _prefect_key, _reported
from codeeval.tasks.skips import skipped
from codeeval.training.args import TrainArgs

EPOCH_FIGURES = (("loss", "loss"), ("eval_loss", "validation loss"), ("eval_accuracy", "validation accuracy"),
                 ("train_eval_accuracy", "training-split accuracy"))


@contextlib.contextmanager
def _followed(task_name: str, log) -> Iterator[Callable[[dict], None]]:
    """The workers' progress lines: a bar of optimizer steps, and one line in the run's log per epoch
    (its training loss, its validation loss and accuracy, its checkpoint)."""
    bar = contextlib.ExitStack()
    state: dict = {"advance": None, "step": 0, "epochs": 0, "logs": {}}

    def on_event(event: dict) -> None:
        kind = event.get("event")
        if kind == "resume":
            log.info("%s: resuming from %s, the last finished checkpoint", task_name, event["folder"])
        elif kind == "begin":
            state["advance"] = bar.enter_context(progress_bar(event["max_steps"], f"train {task_name}", "step"))
            state["advance"](event["step"])
            state["step"], state["epochs"] = event["step"], event.get("epochs", 0)
            if event.get("world_size", 1) > 1:
                log.info("%s: training data-parallel in %d processes", task_name, event["world_size"])
        elif kind == "step" and state["advance"] is not None:
            state["advance"](event["step"] - state["step"])
            state["step"] = event["step"]
        elif kind == "log":
            state["logs"].update(event.get("logs", {}))
        elif kind == "checkpoint":
            figures = ", ".join(f"{label} {state['logs'][key]:.4f}" for key, label in EPOCH_FIGURES
                                if key in state["logs"])
            log.info("%s: epoch %.0f/%d: %s; saved as %s", task_name, event.get("epoch") or 0, state["epochs"],
                     figures, event["folder"])
            state["logs"] = {}

    with bar:
        yield on_event


@task(name="train", persist_result=True, cache_key_fn=_prefect_key, retry_condition_fn=retry_condition)
def train_task(shard: ShardId, layout: RunLayout, splits: tuple, classes: tuple, backend: BackendSpec, args: TrainArgs,
               cache_key: str, run_id: str = "") -> str:
    """Fine-tunes the task's classifier; returns its training log (training/log.parquet), whose
    metadata names the checkpoint of the final weights."""
    out = str(layout.output(shard))
    if kept := _kept(out, cache_key):
        return kept
    run_name = RunLayout.run_name(shard)
    with _reported(shard, layout, run_id, lambda: [], dict(splits)):
        log = get_run_logger()
        with _followed(shard.task, log) as on_event:
            rows, trained = train(backend, args, classes, dict(splits), Path(out).parent, cache_key, run_name,
                                  on_event)
        artifacts.write_table(Path(out), rows, artifacts.TRAINING_LOG_SCHEMA, key=cache_key,
                              extra={artifacts.TRAINED_FIELD: dataclasses.asdict(trained)})
        if trained.samples_per_second:
            log.info("%s: trained on %d examples in %d process(es), %.1f samples/s", shard.task,
                     trained.train_samples, trained.world_size, trained.samples_per_second)
    return out


@task(name="predict", persist_result=True, cache_key_fn=_prefect_key, retry_condition_fn=retry_condition)
def predict_shard(shard: ShardId, layout: RunLayout, problems_path: str, start: int, stop: int, classes: tuple,
                  backend: BackendSpec, args: TrainArgs, trained_path: Optional[str], cache_key: str,
                  run_id: str = "") -> str:
    """The shard's test records predicted by the trained classifier (`trained_path`: the training's log;
    None for the reference backend, whose predictions are the gold labels)."""
    training = RunLayout.run_name(ShardId(shard.task, "train", 0))
    if trained_path is not None and (ends := skipped([(training, trained_path)])):
        return ends
    out = str(layout.output(shard))
    if kept := _kept(out, cache_key):
        return kept
    problems, _ = read_problems(Path(problems_path))
    mine = problems[start:stop]
    with _reported(shard, layout, run_id, lambda: [(p.task_id, 0) for p in mine], {"problems": problems_path}):
        task_spec = get_task(shard.task)
        log_path = storage.fetch(Path(trained_path)) if trained_path is not None else None
        with progress_bar(len(mine), f"predict {shard.task} {Path(out).stem}") as advance:
            rows = predict_rows(task_spec.classification, mine, classes, args, backend, log_path, backend.device,
                                advance)
        artifacts.write_table(Path(out), rows, artifacts.PREDICTIONS_SCHEMA, key=cache_key)
    return out
