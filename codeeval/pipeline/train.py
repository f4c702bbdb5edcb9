"""The train and predict stages of a classification task as plain library code (no Prefect).

load: the training and validation examples as Parquet (`split_rows`: id, text, text pair, label id);
train: the job written beside the checkpoints, the worker processes started and followed, the
Trainer's log history turned into one row per epoch (`train`); predict: one row per test record
(`predict_rows`). The reference backend trains nothing: its predictions are the gold labels.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from codeeval.benchmarks.spec import Classification, Example, Problem
from codeeval.core import artifacts, files, storage
from codeeval.generation import BackendSpec
from codeeval.generation.models import model_source
from codeeval.training import checkpoints, launch
from codeeval.training.args import TrainArgs
from codeeval.training.job import JOB_FILE, RESULT_FILE, ModelRef, TrainJob, TrainResult


def split_rows(examples: Sequence[Example], task: Classification, classes: Sequence[str]) -> list[dict]:
    """A split's examples as the worker reads them: the record's id, its text (and the pair's second
    text), its label as an id in the run's class order."""
    index = {name: i for i, name in enumerate(classes)}
    second = task.inputs[1] if len(task.inputs) > 1 else None
    return [{"id": record_id, "text": record[task.inputs[0]], "text_pair": record[second] if second else None,
             "label": index[task.label(record)]} for record_id, record in examples]


def model_ref(backend: BackendSpec) -> ModelRef:
    """The base model as the worker loads it (a GGUF file's folder and name, a hub id, a directory)."""
    source = model_source.resolve(backend.model, backend.args.revision)
    return ModelRef(source.name_or_path, source.gguf_file, backend.args.revision, backend.args.trust_remote_code)


@dataclass(frozen=True)
class Trained:
    """What the training log's metadata says of the training (artifacts.TRAINED_FIELD)."""

    checkpoint: str  # the final weights' checkpoint, relative to the training folder
    world_size: int
    train_samples: int
    samples_per_second: Optional[float]
    resumed_from: Optional[str]
    started_at: Optional[float]
    first_step_at: Optional[float]


LOG_KEYS = {"loss": "loss", "learning_rate": "learning_rate", "grad_norm": "grad_norm", "eval_loss": "eval_loss",
            "eval_accuracy": "eval_accuracy", "train_eval_loss": "train_eval_loss",
            "train_eval_accuracy": "train_eval_accuracy"}


def log_rows(history: Sequence[dict]) -> list[dict]:
    """The Trainer's log history (a dict per logging event) as one row per epoch; the final summary
    (train_runtime, total_flos) is the metadata's, not a row."""
    rows: dict[float, dict] = {}
    for entry in history:
        if "epoch" not in entry or "total_flos" in entry:
            continue
        row = rows.setdefault(float(entry["epoch"]), {"epoch": float(entry["epoch"]), "step": entry.get("step")})
        row.update({column: float(entry[key]) for key, column in LOG_KEYS.items() if key in entry})
        row["step"] = entry.get("step", row["step"])
    return [rows[epoch] for epoch in sorted(rows)]


def train(backend: BackendSpec, args: TrainArgs, classes: Sequence[str], split_paths: dict[str, str],
          folder: Path, key: str, run_name: str, on_event: Callable[[dict], None]) -> tuple[list[dict], Trained]:
    """Fine-tunes the classifier in `folder` (checkpoints under folder/checkpoints), resuming from the
    newest finished checkpoint of `key`; (the log's rows, what it trained)."""
    root = folder / "checkpoints"
    resume = checkpoints.newest(root, key)
    job = TrainJob(model=model_ref(backend), classes=tuple(classes),
                   train_path=str(storage.fetch(Path(split_paths["train"]))),
                   validation_path=str(storage.fetch(Path(split_paths["validation"]))),
                   checkpoints=str(root), args=args, key=key, resume_from=str(resume) if resume else None,
                   run_name=run_name)
    job_path = files.write_bytes(folder / JOB_FILE, job.to_json().encode())
    (folder / RESULT_FILE).unlink(missing_ok=True)
    if resume is not None:
        on_event({"event": "resume", "folder": resume.name})
    launch.run(job_path, launch.processes(args.num_processes), on_event)
    result = TrainResult.read(folder / RESULT_FILE)
    trained = Trained(checkpoint=f"checkpoints/{result.checkpoint}", world_size=result.world_size,
                      train_samples=result.train_samples, samples_per_second=result.samples_per_second,
                      resumed_from=result.resumed_from, started_at=result.started_at,
                      first_step_at=result.first_step_at)
    return log_rows(result.log_history), trained


def trained_of(log_path: Path) -> Trained:
    """What the training whose log is `log_path` left (its final checkpoint, ...)."""
    data = artifacts.read_metadata(log_path, artifacts.TRAINED_FIELD)
    if data is None:
        raise ValueError(f"{log_path} is not a training log (no {artifacts.TRAINED_FIELD.decode()} metadata)")
    return Trained(**data)


def predict_rows(task: Classification, problems: Sequence[Problem], classes: Sequence[str], args: TrainArgs,
                 backend: BackendSpec, log_path: Optional[Path], device: Optional[str] = None,
                 progress=None) -> list[dict]:
    """One row per test record: its label and the predicted class (ids in the run's order, and names)
    with the class probabilities. `log_path` None: the reference's predictions, the gold labels."""
    gold = [classes.index(task.label(p.record)) for p in problems]
    if log_path is None:
        predicted = gold
        probabilities = [[float(i == g) for i in range(len(classes))] for g in gold]
    else:
        from codeeval.training import predict

        checkpoint = storage.fetch_dir(log_path.parent / trained_of(log_path).checkpoint)
        trained = predict.Classifier(model_ref(backend), len(classes), str(checkpoint), args.freeze, device)
        texts = [p.record[task.inputs[0]] for p in problems]
        pairs = [p.record[task.inputs[1]] for p in problems] if len(task.inputs) > 1 else None
        predicted, probabilities = predict.predict(trained, texts, pairs, args.batch_size, args.max_length, progress)
    return [{"task_id": p.task_id, "sample": 0, "id": p.task_id.rsplit("/", 1)[-1], "label": g,
             "label_name": classes[g], "predicted": y, "predicted_name": classes[y], "probabilities": probs}
            for p, g, y, probs in zip(problems, gold, predicted, probabilities)]
