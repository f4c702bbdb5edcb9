"""What one training is given (`TrainJob`, written as JSON for the worker processes) and what it
leaves (`TrainResult`, the worker's last word). No torch here: the train stage builds the job and
reads the result; codeeval/training/worker.py runs it."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from codeeval.training.args import TrainArgs

JOB_FILE = "job.json"
RESULT_FILE = "result.json"


@dataclass(frozen=True)
class ModelRef:
    """The base model as from_pretrained takes it (codeeval/generation/models/model_source.py), and how."""

    name_or_path: str
    gguf_file: Optional[str] = None
    revision: Optional[str] = None
    trust_remote_code: bool = False

    def load_kwargs(self) -> dict:
        kwargs: dict[str, Any] = {"trust_remote_code": self.trust_remote_code}
        if self.gguf_file:
            kwargs["gguf_file"] = self.gguf_file
        if self.revision:
            kwargs["revision"] = self.revision
        return kwargs


@dataclass(frozen=True)
class TrainJob:
    model: ModelRef
    classes: tuple[str, ...]  # class names by label id (the run's order)
    train_path: str  # Parquet: id, text, text_pair, label
    validation_path: str
    checkpoints: str  # the folder of checkpoint-<step>/ (under the run's storage)
    args: TrainArgs = TrainArgs()
    key: str = ""  # the training's cache key: a checkpoint carries it, and only its own key resumes it
    resume_from: Optional[str] = None  # the newest finished checkpoint of this key, if any
    run_name: str = ""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def read(cls, path: Path) -> "TrainJob":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(**{**data, "model": ModelRef(**data["model"]), "classes": tuple(data["classes"]),
                      "args": TrainArgs(**data["args"])})


@dataclass(frozen=True)
class TrainResult:
    """Rank 0's account of a finished training: the checkpoint that holds the final weights, the
    Trainer's log history (every epoch since the first, across resumes), and the throughput."""

    checkpoint: str  # its folder name under the job's checkpoints
    log_history: list = field(default_factory=list)
    world_size: int = 1
    train_samples: int = 0
    samples_per_second: Optional[float] = None  # the Trainer's own figure for this process's training
    resumed_from: Optional[str] = None
    started_at: Optional[float] = None  # when rank 0's process started (time.time())
    first_step_at: Optional[float] = None  # when it finished its first optimizer step (None: none left to take)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def read(cls, path: Path) -> "TrainResult":
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))
