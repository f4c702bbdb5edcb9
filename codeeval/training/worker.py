"""One process of a training: `python -m codeeval.training.worker JOB_JSON`.

Runs Hugging Face's Trainer as bigcode's finetuning/*/train.py runs it (the same TrainingArguments,
collator, metric and per-epoch callback), on the job's tokenized splits, from the job's checkpoint if
it has one. codeeval/training/launch.py starts one such process per device with the environment of
`accelerate launch` (RANK, WORLD_SIZE, MASTER_ADDR, ...); the Trainer then trains data-parallel.
Rank 0 prints its progress as JSON lines on stdout, marks each checkpoint finished once every rank
has written its part, and writes the job's TrainResult at the end.
"""
from __future__ import annotations

import json
import os
import sys
import time
from copy import deepcopy
from pathlib import Path

STARTED = time.time()


def _say(event: str, **fields) -> None:
    print(json.dumps({"event": event, "time": time.time(), **fields}), flush=True)


def _dataset(tokenizer, path: str, max_length: int):
    from datasets import Dataset

    from codeeval.training.classifier import encode, read_split

    split = read_split(Path(path))
    encoded = encode(tokenizer, split["text"], split["text_pair"], max_length)
    return Dataset.from_dict({**encoded, "label": split["label"]})


def _callbacks(trainer, job, rank: int, world: int):
    """The scripts' per-epoch evaluation on the training split (when `train_eval`), our progress
    lines and our checkpoint marks."""
    import torch.distributed as dist
    from transformers import TrainerCallback

    from codeeval.training import checkpoints

    class TrainEval(TrainerCallback):
        """bigcode's CustomCallback: at each epoch's end, evaluate on the training split too (under
        `train_eval_`; it draws on torch's RNG, so later epochs depend on it, as theirs do)."""

        def on_epoch_end(self, args, state, control, **kwargs):
            if control.should_evaluate:
                kept = deepcopy(control)
                trainer.evaluate(eval_dataset=trainer.train_dataset, metric_key_prefix="train_eval")
                return kept

    class Report(TrainerCallback):
        def __init__(self) -> None:
            self.last = 0.0
            self.first = None

        def on_train_begin(self, args, state, control, **kwargs):
            if rank == 0:
                _say("begin", max_steps=state.max_steps, step=state.global_step, world_size=world,
                     epochs=args.num_train_epochs)

        def on_step_end(self, args, state, control, **kwargs):
            if self.first is None:
                self.first = time.time()
            if rank == 0 and (time.time() - self.last >= 1.0 or state.global_step == state.max_steps):
                self.last = time.time()
                _say("step", step=state.global_step, max_steps=state.max_steps, epoch=state.epoch)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if rank == 0 and logs:
                _say("log", step=state.global_step, logs=logs)

        def on_save(self, args, state, control, **kwargs):
            if world > 1:
                dist.barrier()  # every rank's share of the checkpoint (its RNG state) is written
            if rank == 0:
                folder = Path(args.output_dir) / f"{checkpoints.PREFIX}{state.global_step}"
                checkpoints.mark(folder, job.key)
                checkpoints.prune(Path(args.output_dir), job.key, job.args.keep_checkpoints)
                _say("checkpoint", step=state.global_step, epoch=state.epoch, folder=folder.name)

    report = Report()
    return ([TrainEval()] if job.args.train_eval else []) + [report], report


def main(argv: list[str]) -> int:
    from codeeval.training.job import RESULT_FILE, TrainJob, TrainResult

    job_path = Path(argv[1])
    job = TrainJob.read(job_path)
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))

    import numpy as np
    import torch
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, set_seed
    from transformers.utils import logging as hf_logging

    from codeeval.core import files
    from codeeval.training.classifier import load_model, load_tokenizer

    hf_logging.set_verbosity_warning()
    tokenizer = load_tokenizer(job.model)
    a = job.args
    train = _dataset(tokenizer, job.train_path, a.max_length)
    validation = _dataset(tokenizer, job.validation_path, a.max_length)
    cpu_parallel = world > 1 and not torch.cuda.is_available()
    set_seed(a.seed)  # the scripts' set_seed, before the head is drawn
    model = load_model(job.model, len(job.classes), a.freeze)
    args = TrainingArguments(
        output_dir=job.checkpoints, learning_rate=a.learning_rate, lr_scheduler_type=a.lr_scheduler_type,
        eval_strategy="epoch", save_strategy="epoch", logging_strategy="epoch",
        per_device_train_batch_size=a.batch_size, per_device_eval_batch_size=a.batch_size,
        num_train_epochs=a.num_epochs, gradient_accumulation_steps=a.gradient_accumulation_steps,
        weight_decay=a.weight_decay, metric_for_best_model="accuracy", run_name=job.run_name or None,
        warmup_steps=a.num_warmup_steps, seed=a.trainer_seed, report_to="none", disable_tqdm=True,
        # data-parallel on CPUs is accelerate's MULTI_CPU over gloo (`accelerate launch --cpu`)
        use_cpu=cpu_parallel, ddp_backend="gloo" if cpu_parallel else None,
        # the Trainer multiplies each process's loss by the process count, for losses that divide by the
        # batch's tokens on every device; a classification head's loss is its own batch's mean, which
        # DDP then averages: that factor would double the gradients and the logged losses of two
        # processes (one process: no factor either way; docs/deviations.md)
        average_tokens_across_devices=False,
    )

    def accuracy(prediction):
        predictions, labels = prediction
        return {"accuracy": float(np.mean(np.argmax(predictions, axis=1) == labels))}

    trained = {name for name, parameter in model.named_parameters() if parameter.requires_grad}

    class Checkpointing(Trainer):
        """With the base model frozen, a checkpoint holds the weights that train (the head: kilobytes, where
        the whole model is gigabytes, every epoch); the rest is the base model's, as loaded. The Trainer
        loads a checkpoint into the model non-strictly on resume, and so does prediction."""

        def _save(self, output_dir=None, state_dict=None):
            if state_dict is None and a.freeze:
                state_dict = {k: v for k, v in self.model.state_dict().items() if k in trained}
            super()._save(output_dir, state_dict)

    trainer = Checkpointing(model=model, args=args, train_dataset=train, eval_dataset=validation,
                            processing_class=tokenizer, data_collator=DataCollatorWithPadding(tokenizer=tokenizer),
                            compute_metrics=accuracy)
    callbacks, report = _callbacks(trainer, job, rank, world)
    for callback in callbacks:
        trainer.add_callback(callback)
    output = trainer.train(resume_from_checkpoint=job.resume_from)
    if rank == 0:
        last = f"checkpoint-{trainer.state.global_step}"
        result = TrainResult(checkpoint=last, log_history=trainer.state.log_history, world_size=world,
                             train_samples=len(train),
                             samples_per_second=output.metrics.get("train_samples_per_second"),
                             resumed_from=Path(job.resume_from).name if job.resume_from else None,
                             started_at=STARTED, first_step_at=report.first)
        files.write_bytes(job_path.parent / RESULT_FILE, result.to_json().encode())
        _say("end", checkpoint=last)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
