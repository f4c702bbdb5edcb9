"""The classification tasks' options: bigcode's finetuning/*/train.py flags with their values.

Declared once here, each with its help: the CLI's flags (codeeval/cli_args.py), a deployment's
`config.training`, the cache keys and docs/usage.md's table read them from this dataclass.
Importable without torch.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields
from typing import Optional

SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
              "inverse_sqrt", "cosine_with_min_lr", "warmup_stable_decay")
SHARED = ("batch_size", "seed")  # flags a run's generating tasks read too (bigcode's main.py has them)


def _option(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class TrainArgs:
    """The scripts' flags and defaults (the three scripts share them), then codeeval's own."""

    num_epochs: int = _option(5, "epochs of fine-tuning")
    batch_size: int = _option(6, "examples per device and step, in training and evaluation")
    gradient_accumulation_steps: int = _option(1, "steps whose gradients add up before an update")
    freeze: bool = _option(True, "freeze the base model: only the classification head trains")
    learning_rate: float = _option(5e-4, "peak learning rate (AdamW)")
    seed: int = _option(0, "the scripts' set_seed: CodeComplex's split and the head's first weights")
    lr_scheduler_type: str = _option("cosine", f"learning-rate schedule: {', '.join(SCHEDULERS)}")
    num_warmup_steps: int = _option(0, "warm-up steps; the scripts declare 10 but never pass it on, "
                                       "so they train with none (docs/deviations.md)")
    weight_decay: float = _option(0.01, "AdamW's weight decay")
    max_length: int = _option(1024, "tokens per input (the rest is cut off)")
    trainer_seed: int = _option(42, "the Trainer's own seed (data order, dropout); the scripts leave it at "
                                    "the Trainer's default")
    train_eval: bool = _option(True, "each epoch, evaluate on the training split too, as the scripts' "
                                     "callback does (it draws on the RNG: later epochs depend on it)")
    label_order: Optional[str] = _option(None, "class names by label id, comma-separated (default: the "
                                               "task's order, docs/classification.md)")
    max_train_samples: Optional[int] = _option(None, "train on the first N records of the training split")
    max_eval_samples: Optional[int] = _option(None, "validate on the first N records of the validation split")
    num_processes: int = _option(0, "data-parallel training processes (0: one per visible GPU, else one)")
    keep_checkpoints: int = _option(1, "checkpoints kept in the storage, newest first (a resume needs one)")

    def check(self) -> Optional[str]:
        """Why these values cannot train, in one phrase; None when they can."""
        for name in ("num_epochs", "batch_size", "gradient_accumulation_steps", "max_length", "keep_checkpoints"):
            if getattr(self, name) < 1:
                return f"{name} must be >= 1, got {getattr(self, name)}"
        for name in ("num_warmup_steps", "num_processes"):
            if getattr(self, name) < 0:
                return f"{name} must be >= 0, got {getattr(self, name)}"
        for name in ("max_train_samples", "max_eval_samples"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                return f"{name} must be >= 1, got {getattr(self, name)}"
        if not self.learning_rate > 0:
            return f"learning_rate must be > 0, got {self.learning_rate}"
        if self.weight_decay < 0:
            return f"weight_decay must be >= 0, got {self.weight_decay}"
        if self.lr_scheduler_type not in SCHEDULERS:
            return f"lr_scheduler_type {self.lr_scheduler_type!r} is not one of {', '.join(SCHEDULERS)}"
        return None


def options() -> list:
    """The options' dataclass fields, in order (name, default, metadata['help'])."""
    return list(fields(TrainArgs))


def kind(option) -> type:
    """The option's value type (int for an Optional[int])."""
    hint = typing.get_type_hints(TrainArgs)[option.name]
    return next(a for a in typing.get_args(hint) if a is not type(None)) if typing.get_args(hint) else hint


def markdown() -> str:
    """docs/usage.md's rows for these options (tests/test_docs_usage.py holds the two equal)."""
    def shown(value) -> str:
        return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    return "\n".join(f"| `--{o.name}` | {shown(o.default)} | classification tasks: {o.metadata['help']} |"
                     for o in options() if o.name not in SHARED)
