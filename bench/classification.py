"""What the DAG costs a classification task's training: codeeval's train stage against a plain Trainer
script on the same data, model and arguments, in one run, interleaved.

  .venv/bin/python bench/classification.py [--model tiny|smollm2|PATH] [--task codeclone] [--copies 10]
      [--epochs 2] [--rounds 2] [--max-length 512]

The plain script is bigcode's script as it trains (the same TrainingArguments, collator, metric and
per-epoch evaluation on the training split), written out here: load the local data with `datasets`,
tokenize, `set_seed`, build the classifier, `Trainer.train()`. codeeval's side is the whole command,
`codeeval run --model M --tasks T`: its private Prefect API, the load stage, the train task and its
worker process, prediction and scoring. Printed per side (medians over --rounds, each round the
plain script then codeeval, the next round the other way round):
* samples/s: the Trainer's own `train_samples_per_second` (training examples x epochs over the time
  in `train()`, the per-epoch evaluations included, on both sides alike);
* time to first step: from the command's start to the end of its first optimizer step (codeeval:
  Prefect's start, the data's load and split files, the worker's start, the tokenization, the model);
then `throughput_ratio` (codeeval / plain; the issue's bar: >= 0.95) and the first-step difference.

The data are the task's fixtures (tests/fixtures/classification) with each training record repeated
--copies times (ids renumbered), written once under $CODEEVAL_CACHE/classification-bench.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "classification"
sys.path.insert(0, str(REPO / "tests"))

PLAIN = textwrap.dedent('''
    import json, sys, time
    started = time.time()
    from copy import deepcopy
    import numpy as np
    from datasets import load_dataset
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainerCallback, TrainingArguments, set_seed)
    model, files, fields, epochs, max_length, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].split(","), \\
        int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    set_seed(0)
    ds = load_dataset("json", data_files=files)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.pad_token = tokenizer.eos_token
    classifier = AutoModelForSequenceClassification.from_pretrained(model, num_labels=2)
    classifier.config.pad_token_id = classifier.config.eos_token_id
    for p in classifier.base_model.parameters():
        p.requires_grad = False

    def tokenize(batch):
        texts = [batch[f] for f in fields]
        enc = tokenizer(*texts, truncation=True, max_length=max_length)
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                "label": batch["label"]}

    data = ds.map(tokenize, batched=True, remove_columns=ds["train"].column_names)

    def accuracy(prediction):
        predictions, labels = prediction
        return {"accuracy": float(np.mean(np.argmax(predictions, axis=1) == labels))}

    class TrainEval(TrainerCallback):
        def on_epoch_end(self, args, state, control, **kwargs):
            if control.should_evaluate:
                kept = deepcopy(control)
                trainer.evaluate(eval_dataset=trainer.train_dataset, metric_key_prefix="train_eval")
                return kept

    class First(TrainerCallback):
        first = None

        def on_step_end(self, args, state, control, **kwargs):
            First.first = First.first or time.time()

    args = TrainingArguments(output_dir=out, learning_rate=5e-4, lr_scheduler_type="cosine", eval_strategy="epoch",
                             save_strategy="epoch", logging_strategy="epoch", per_device_train_batch_size=6,
                             per_device_eval_batch_size=6, num_train_epochs=epochs, weight_decay=0.01,
                             metric_for_best_model="accuracy", report_to="none", disable_tqdm=True)
    trainer = Trainer(model=classifier, args=args, train_dataset=data["train"], eval_dataset=data["validation"],
                      processing_class=tokenizer, data_collator=DataCollatorWithPadding(tokenizer=tokenizer),
                      compute_metrics=accuracy)
    trainer.add_callback(TrainEval())
    trainer.add_callback(First())
    output = trainer.train()
    print(json.dumps({"samples_per_second": output.metrics["train_samples_per_second"],
                      "first_step_at": First.first, "started_at": started}))
''')

FIELDS = {"codeclone": ("func1", "func2"), "codedefect": ("func",)}


def cache_root() -> Path:
    return Path(os.environ.get("CODEEVAL_CACHE") or Path.home() / ".cache" / "codeeval") / "classification-bench"


def data_dir(task: str, copies: int) -> Path:
    """The task's fixture splits as JSON lines, its training split `copies` times over (ids renumbered)."""
    import pyarrow.parquet as pq

    root = cache_root() / f"data-{task}-{copies}"
    if (root / task / "test.jsonl").is_file():
        return root
    (root / task).mkdir(parents=True, exist_ok=True)
    label = "label" if task == "codeclone" else "target"
    for split in ("train", "validation", "test"):
        source = FIXTURES / task / f"{split}.jsonl"
        rows = [json.loads(line) for line in source.read_text().splitlines()] if source.is_file() else \
            pq.read_table(FIXTURES / task / "data" / f"{split}-00000-of-00001.parquet").to_pylist()
        rows = rows * (copies if split == "train" else 1)
        with open(root / task / f"{split}.jsonl", "w") as fh:
            for i, row in enumerate(rows):
                fh.write(json.dumps({**row, "id": i if split == "train" else row["id"],
                                     "label": int(bool(row[label]))}) + "\n")
    return root


def model_path(name: str) -> str:
    if name == "tiny":
        from classifier_models import ensure_tiny_roberta

        return str(ensure_tiny_roberta(cache_root() / "tiny-roberta"))
    if name == "smollm2":
        done = subprocess.run([sys.executable, str(REPO / "scripts" / "fetch-smollm2.py"), "--hf"],
                              capture_output=True, text=True, check=True)
        return done.stdout.strip()
    return name


def env() -> dict:
    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return {**base, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE",
            "TOKENIZERS_PARALLELISM": "false", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}


def plain(model: str, data: Path, task: str, epochs: int, max_length: int) -> dict:
    files = {split: str(data / task / f"{split}.jsonl") for split in ("train", "validation")}
    with tempfile.TemporaryDirectory() as out:
        started = time.time()
        done = subprocess.run([sys.executable, "-c", PLAIN, model, json.dumps(files), ",".join(FIELDS[task]),
                               str(epochs), str(max_length), out], env=env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {"samples_per_second": figures["samples_per_second"], "first_step_s": figures["first_step_at"] - started}


def ours(model: str, data: Path, task: str, epochs: int, max_length: int) -> dict:
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as out:
        started = time.time()
        done = subprocess.run([sys.executable, "-m", "codeeval", "run", "--model", model, "--tasks", task,
                               "--data-dir", str(data), "--num_epochs", str(epochs), "--max_length", str(max_length),
                               "--output-dir", f"{out}/run"], env={**env(), "PREFECT_HOME": f"{out}/prefect"},
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        meta = pq.read_schema(Path(out) / "run" / task / "training" / "log.parquet").metadata
        trained = json.loads(meta[b"codeeval.trained"])
    return {"samples_per_second": trained["samples_per_second"], "first_step_s": trained["first_step_at"] - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny (tests/classifier_models.py), smollm2, or a path")
    parser.add_argument("--task", default="codeclone", choices=sorted(FIELDS))
    parser.add_argument("--copies", type=int, default=10, help="times the training split is repeated")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=512)
    args = parser.parse_args()
    model, data = model_path(args.model), data_dir(args.task, args.copies)
    print(f"model {model}; task {args.task}, its training split x{args.copies}; {args.epochs} epochs; "
          f"{args.rounds} rounds; cores {os.cpu_count()}; load {os.getloadavg()[0]:.1f}")
    sides = {"plain": plain, "codeeval": ours}
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in (list(sides) if r % 2 == 0 else list(reversed(sides))):
            result = sides[name](model, data, args.task, args.epochs, args.max_length)
            runs[name].append(result)
            print(f"round {r + 1} {name:<8} {result['samples_per_second']:8.2f} samples/s  "
                  f"first step after {result['first_step_s']:6.2f} s")
    median = {name: {k: statistics.median(r[k] for r in results) for k in results[0]} for name, results in runs.items()}
    for name, m in median.items():
        print(f"{name:<8} median {m['samples_per_second']:8.2f} samples/s  first step after {m['first_step_s']:6.2f} s")
    ratio = median["codeeval"]["samples_per_second"] / median["plain"]["samples_per_second"]
    extra = median["codeeval"]["first_step_s"] - median["plain"]["first_step_s"]
    print(f"throughput_ratio={ratio:.3f} (codeeval / plain Trainer script; bar >= 0.95)  "
          f"first_step_extra_s={extra:.2f}")


if __name__ == "__main__":
    main()
