"""The run directory and its Parquet/JSON artifacts (DESIGN.md, 'Stages and artifacts').

runs/<run_id>/run.json
runs/<run_id>/<task>/problems.parquet
runs/<run_id>/<task>/generations/shard-NNNNN.parquet
runs/<run_id>/<task>/executions/shard-NNNNN.parquet
runs/<run_id>/<task>/errors/<stage>-shard-NNNNN.json   (a failed shard's record: pipeline/failures.py)
runs/<run_id>/<task>/waits/<stage>-shard-NNNNN.json    (a shard waiting for a slot: pipeline/waits.py)
runs/<run_id>/<task>/metrics.json
runs/<run_id>/results.json
A classification task trains and predicts instead of generating and executing:
runs/<run_id>/<task>/splits/{train,validation}.parquet   the examples it trains on, labels as ids
runs/<run_id>/<task>/training/log.parquet               loss, validation loss and accuracy per epoch
runs/<run_id>/<task>/training/checkpoints/checkpoint-N/ the Trainer's checkpoint of each epoch (kept: the last)
runs/<run_id>/<task>/predictions/shard-NNNNN.parquet    per test record: label, prediction, probabilities
Every write goes to a temporary file first and is renamed into place, so a crash never
leaves a half-written artifact that a re-run would take for a finished one; the temporary
file's name holds the writer's pid, and the next run removes those of dead writers. Files are
created as open(2) does, 0666 less the umask (0644 under the usual 022), folders 0777 less it:
a leaderboard served by any web server, a run on a shared path, are readable by others.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from codeeval.core import files, provenance, storage
from codeeval.core.contracts import ShardId

PROBLEMS_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("index", pa.int64()), ("prompt", pa.string()),
    ("record", pa.string()), ("n_samples", pa.int64()),
    ("repo", pa.string()), ("site", pa.string()),  # JSON of Problem.repo / .site (repo-level), else null
])
GENERATIONS_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("sample", pa.int64()), ("raw", pa.string()), ("completion", pa.string()),
    ("n_tokens", pa.int64()), ("finish_reason", pa.string()),
    # a reasoning model's thinking, taken off the answer, and its tokens (null: none, or not told)
    ("thinking", pa.string()), ("thinking_tokens", pa.int64()),
])
EXECUTIONS_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("sample", pa.int64()), ("status", pa.string()), ("passed", pa.bool_()),
    ("exit_code", pa.int64()), ("duration_s", pa.float64()), ("cpu_s", pa.float64()), ("stdout_tail", pa.string()),
    ("stderr_tail", pa.string()), ("detail", pa.string()),
    # the judged detail (codeeval/benchmarks/spec.py Verdict): per-test codes, named sub-verdicts, a produced value
    ("tests", pa.list_(pa.int8())), ("subsets", pa.map_(pa.string(), pa.bool_())), ("answer", pa.string()),
    ("score", pa.float64()),
])

SPLIT_SCHEMA = pa.schema([  # a classification task's training or validation examples
    ("id", pa.string()), ("text", pa.string()), ("text_pair", pa.string()), ("label", pa.int64()),
])
PREDICTIONS_SCHEMA = pa.schema([  # one row per test record; label and prediction as ids and as class names
    ("task_id", pa.string()), ("sample", pa.int64()), ("id", pa.string()), ("label", pa.int64()),
    ("label_name", pa.string()), ("predicted", pa.int64()), ("predicted_name", pa.string()),
    ("probabilities", pa.list_(pa.float64())),
])
TRAINING_LOG_SCHEMA = pa.schema([  # one row per epoch; train_eval_*: the scripts' evaluation on the training split
    ("epoch", pa.float64()), ("step", pa.int64()), ("loss", pa.float64()), ("learning_rate", pa.float64()),
    ("grad_norm", pa.float64()), ("eval_loss", pa.float64()), ("eval_accuracy", pa.float64()),
    ("train_eval_loss", pa.float64()), ("train_eval_accuracy", pa.float64()),
])
TRAINED_FIELD = b"codeeval.trained"  # the training log's metadata: the checkpoint of the final weights, ...

# a shard's Parquet folder, per contracts.STAGES (a training has one file: training/log.parquet)
STAGE_FOLDERS = {"generate": "generations", "execute": "executions", "train": "training", "predict": "predictions"}


@dataclass(frozen=True)
class RunLayout:
    """Every name of a run's files, and of its shards' task runs: the one place that spells them."""

    root: Path

    @staticmethod
    def run_name(shard: ShardId) -> str:
        """The shard's task run (and work-pool flow run) in the UI: `generate-humaneval-shard-003`;
        a task's training is one run, `train-codecomplex`."""
        if shard.stage == "train":
            return f"train-{shard.task}"
        return f"{shard.stage}-{shard.task}-shard-{shard.index:03d}"

    def output(self, shard: ShardId) -> Path:
        if shard.stage == "train":
            return self.training(shard.task) / "log.parquet"
        return self.task_dir(shard.task) / STAGE_FOLDERS[shard.stage] / f"shard-{shard.index:05d}.parquet"

    def split(self, task: str, name: str) -> Path:
        """A classification task's training or validation examples."""
        return self.task_dir(task) / "splits" / f"{name}.parquet"

    def training(self, task: str) -> Path:
        """A classification task's training: its log, its job, its workers' logs, its checkpoints."""
        return self.task_dir(task) / STAGE_FOLDERS["train"]

    def checkpoints(self, task: str) -> Path:
        return self.training(task) / "checkpoints"

    def error_record(self, shard: ShardId) -> Path:
        return self.errors(shard.task) / f"{shard.stage}-shard-{shard.index:05d}.json"

    def wait_record(self, shard: ShardId) -> Path:
        return self.waits(shard.task) / f"{shard.stage}-shard-{shard.index:05d}.json"

    def errors(self, task: str) -> Path:
        return self.task_dir(task) / "errors"

    def waits(self, task: str) -> Path:
        return self.task_dir(task) / "waits"

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def results(self) -> Path:
        return self.root / "results.json"

    def task_dir(self, task: str) -> Path:
        return self.root / task

    def problems(self, task: str) -> Path:
        return self.task_dir(task) / "problems.parquet"

    def generations(self, task: str, index: int) -> Path:
        return self.output(ShardId(task, "generate", index))

    def executions(self, task: str, index: int) -> Path:
        return self.output(ShardId(task, "execute", index))

    def predictions(self, task: str, index: int) -> Path:
        return self.output(ShardId(task, "predict", index))

    def metrics(self, task: str) -> Path:
        return self.task_dir(task) / "metrics.json"


def write_atomically(path: Path, write, publish: bool = True) -> Path:
    """`files.write_atomically`, then put in the fsspec store (when CODEEVAL_STORAGE is a URL)
    unless `publish` is False."""
    files.write_atomically(path, write)
    if publish:
        storage.publish(path)
    return path


KEY_FIELD = b"codeeval.key"
USAGE_FIELD = b"codeeval.usage"
COMPUTE_FIELD = b"codeeval.compute"  # what a shard's decoding took on local weights (pipeline/usage.py)
WORKER_FIELD = b"codeeval.worker"  # who wrote a shard (core/provenance.py)
SANDBOX_FIELD = b"codeeval.sandbox"  # where an execution shard's programs ran: executor, image, runtime


def write_table(path: Path, rows: Iterable[Mapping[str, Any]], schema: pa.Schema, key: str | None = None,
                usage: Optional[dict] = None, extra: Optional[Mapping[bytes, Any]] = None) -> Path:
    """`key` (a shard's cache key) goes in the file's metadata: see `written_with`, with this process as
    its writer (`written_by`); so does `usage`, what generating the shard cost (an API backend's requests
    and tokens: `read_usage`), which travels with it, and each value of `extra` as JSON (`read_metadata`)."""
    extra = {**({KEY_FIELD: key.encode(), WORKER_FIELD: json.dumps(provenance.this_worker()).encode()}
                if key is not None else {}),
             **({USAGE_FIELD: json.dumps(usage).encode()} if usage else {}),
             **{field: json.dumps(value).encode() for field, value in (extra or {}).items()}}
    if extra:
        schema = schema.with_metadata({**(schema.metadata or {}), **extra})
    table = pa.Table.from_pylist(list(rows), schema=schema)
    return write_atomically(path, lambda tmp: pq.write_table(table, tmp))


def read_metadata(path: Path, field: bytes) -> Optional[dict]:
    """A JSON value the file's metadata holds under `field` (write_table's `extra`), else None."""
    metadata = _metadata(path) or {}
    return json.loads(metadata[field]) if field in metadata else None


def written_with(path: Path, key: str) -> bool:
    """Whether `path` is a finished shard for `key`. A kill between the file's rename and
    Prefect's cache record would otherwise make the next run redo a finished shard."""
    return (_metadata(path) or {}).get(KEY_FIELD) == key.encode()


def _metadata(path: Path) -> Optional[dict]:
    try:
        return pq.read_schema(storage.fetch(path)).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return None


def read_usage(path: Path) -> Optional[dict]:
    """The usage a shard's file was written with (write_table), else None."""
    return read_metadata(path, USAGE_FIELD)


def written_by(path: Path) -> Optional[dict]:
    """The worker that wrote the shard `path` (core/provenance.py): None when there is no such file,
    {} for one written before writers were recorded."""
    metadata = _metadata(path)
    if metadata is None:
        return None
    return json.loads(metadata[WORKER_FIELD]) if WORKER_FIELD in metadata else {}


def read_rows(path: Path, columns: Optional[Sequence[str]] = None) -> list[dict]:
    """The file's rows; with `columns`, only those of them that the file has (a reader that
    needs a few columns of a large shard leaves the rest, program texts and logs, on disk)."""
    local = storage.fetch(path)
    if columns is not None:
        present = set(pq.read_schema(local).names)
        columns = [c for c in columns if c in present]
    return pq.read_table(local, columns=columns).to_pylist()


def write_bytes(path: Path, data: bytes) -> Path:
    files.write_bytes(path, data)
    storage.publish(path)
    return path


def write_output(path: str, data: bytes) -> str:
    """An output file the user named (--metric_output_path, --save_generations_path): at a URL it is
    written there; a path is written like every artifact (atomically, and put in the store when it
    is under the storage's mirror)."""
    if "://" in path:
        return storage.write_url(path, data)
    return str(write_bytes(Path(path), data))


def write_json(path: Path, data: Any) -> Path:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False)
            fh.write("\n")

    return write_atomically(path, write)
