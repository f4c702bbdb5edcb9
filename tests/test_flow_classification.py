"""The classification tasks end to end, as `codeeval run` runs them: real fine-tuning (transformers'
Trainer in worker processes) of a tiny RoBERTa, the reference's architecture, and of SmolLM2-135M
(a Llama: its class read at the last non-pad token), on the fixtures in the data sets' own formats,
through the flow on its private Prefect API. What a person sees: the artifacts, the scores, a re-run
that trains nothing, a change that trains again, a run stopped at a random step (SIGKILL, Ctrl-C)
that resumes to the same predictions, two processes training data-parallel, bad input in one line."""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from classifier_models import Recipe, ensure_tiny_roberta
from procs import alive, children
from view_data import site_data

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "classification"
# CodeComplex's 67 training records: 12 steps an epoch at the scripts' batch of 6, 60 in 5 epochs
RESUMED = ["--tasks", "codecomplex", "--num_epochs", "5", "--learning_rate", "5e-3"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("classification-runs")
    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return {**base, "PREFECT_HOME": str(root / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1", "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(ensure_tiny_roberta(tmp_path_factory.mktemp("tiny-roberta") / "model"))


def command(model: str, out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "codeeval", "run", "--model", model, "--data-dir", str(FIXTURES),
            "--output-dir", str(out), *args]


def run(env: dict, model: str, out: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run(command(model, out, *args), env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-4000:]
    return done


def predictions(out: Path, task: str) -> list[dict]:
    return [row for path in sorted((out / task / "predictions").glob("shard-*.parquet"))
            for row in pq.read_table(path).to_pylist()]


def training_log(out: Path, task: str) -> tuple[list[dict], dict]:
    table = pq.read_table(out / task / "training" / "log.parquet")
    return table.to_pylist(), json.loads(table.schema.metadata[b"codeeval.trained"])


def test_three_tasks_train_predict_and_score_and_a_rerun_trains_nothing(env, tiny, tmp_path):
    out = tmp_path / "run"
    args = ["--tasks", "codecomplex,codeclone,codedefect", "--num_epochs", "2", "--shard_size", "7"]
    done = run(env, tiny, out, *args)
    results = json.loads((out / "results.json").read_text())
    tests = {"codecomplex": 8, "codeclone": 16, "codedefect": 16}
    for task, n in tests.items():
        rows = predictions(out, task)
        assert [r["task_id"] for r in rows] == pq.read_table(out / task / "problems.parquet")["task_id"].to_pylist()
        assert len(rows) == n and all(abs(sum(r["probabilities"]) - 1) < 1e-9 for r in rows)
        assert all(r["predicted"] == max(range(len(r["probabilities"])), key=r["probabilities"].__getitem__)
                   for r in rows)
        metrics = results[task]
        assert metrics["accuracy"] == sum(r["predicted"] == r["label"] for r in rows) / n
        assert sum(map(sum, metrics["confusion_matrix"])) == n and 0 <= metrics["macro_f1"] <= 1
        summary = results["codeeval"]["tasks"][task]
        assert summary["primary"] == "accuracy" and summary["problems"] == n
        assert summary["stderr_method"]["accuracy"] == "closed form over problems"
        assert summary["reused"] == {"train": [0, 1], "predict": [0, (n + 5) // 6]}  # shards: whole batches of 6
        log, trained = training_log(out, task)
        assert [r["epoch"] for r in log] == [1.0, 2.0]
        assert all(r["loss"] > 0 and r["eval_loss"] > 0 and 0 <= r["eval_accuracy"] <= 1
                   and r["train_eval_accuracy"] is not None for r in log)
        assert trained["world_size"] == 1 and trained["checkpoint"] == f"checkpoints/checkpoint-{log[-1]['step']}"
        # one checkpoint kept, readable by the team, its weights the head's alone (the base was frozen)
        (checkpoint,) = (out / task / "training" / "checkpoints").iterdir()
        assert all(p.stat().st_mode & 0o044 == 0o044 for p in checkpoint.iterdir())
        from safetensors import safe_open

        with safe_open(str(checkpoint / "model.safetensors"), "pt") as f:
            assert f.keys() and all(k.startswith("classifier.") for k in f.keys())
    for line in ("codecomplex            accuracy=", "reused 0/1 trainings and 0/2 prediction shards"):
        assert line in done.stdout, done.stdout
    again = run(env, tiny, out, *args)
    assert "reused 1/1 trainings and 3/3 prediction shards" in again.stdout, again.stdout
    assert "epoch 1/2" not in again.stderr  # nothing trained
    assert json.loads((out / "results.json").read_text())["codeclone"] == results["codeclone"]

    # inspect and compare read the run like any other: paired on the same test records, against the oracle
    said = subprocess.run([sys.executable, "-m", "codeeval", "inspect", str(out)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert said.returncode == 0 and re.search(r"## codeclone: trained, 3 prediction shards written, 0 failed shards, "
                                              r"\d+ misclassified test records", said.stdout), said.stdout
    oracle = tmp_path / "oracle"
    run(env, "reference", oracle, "--tasks", "codeclone")
    compared = subprocess.run([sys.executable, "-m", "codeeval", "compare", str(oracle), str(out)], env=env,
                              capture_output=True, text=True, timeout=120)
    wrong = sum(r["predicted"] != r["label"] for r in predictions(out, "codeclone"))
    assert compared.returncode == 0, compared.stderr
    assert f"codeclone: accuracy A 1.0000  B {results['codeclone']['accuracy']:.4f}" in compared.stdout, compared.stdout
    assert "(McNemar's exact test, 16 problems scored by both)" in compared.stdout, compared.stdout
    assert f"pass->fail: {wrong} problems" in compared.stdout and "fail->pass: 0 problems" in compared.stdout

    # the run's view (written by the flow) shows each test record's label against its prediction
    _, viewed = site_data(out / "view")
    for task in tests:
        rows = predictions(out, task)
        assert viewed[task]["kind"] == "classification"
        assert [(r["label"], r["predicted"], r["passed"]) for r in viewed[task]["runs"][0]] == [
            (r["label_name"], r["predicted_name"], r["label"] == r["predicted"]) for r in rows]


def test_a_change_of_a_hyperparameter_or_of_the_data_trains_again(env, tiny, tmp_path):
    """The same run directory, another learning rate: trained again (its old checkpoint goes); a training
    record changed in place: trained again too."""
    data = tmp_path / "data"
    (data / "codeclone").mkdir(parents=True)
    for split in ("train", "validation", "test"):
        (data / "codeclone" / f"{split}.jsonl").write_bytes((FIXTURES / "codeclone" / f"{split}.jsonl").read_bytes())
    out = tmp_path / "run"
    base = ["--tasks", "codeclone", "--num_epochs", "1", "--data-dir", str(data)]
    run(env, tiny, out, *base)
    first = training_log(out, "codeclone")
    relearned = run(env, tiny, out, *base, "--learning_rate", "1e-3")
    assert "reused 0/1 trainings" in relearned.stdout and training_log(out, "codeclone") != first
    lines = (data / "codeclone" / "train.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["func1"] = record["func1"].replace("{", "{ // changed", 1)
    (data / "codeclone" / "train.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    changed = run(env, tiny, out, *base, "--learning_rate", "1e-3")
    assert "reused 0/1 trainings" in changed.stdout, changed.stdout  # (a run with nothing changed: reused, above)


@pytest.fixture(scope="module")
def uninterrupted(env, tiny, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    run(env, tiny, out, *RESUMED)
    return out


def stop_at(env: dict, model: str, out: Path, step: int, signum: int) -> tuple[int, set[int], str]:
    """Start the run, follow its training's progress bar on stderr, send `signum` once it shows step
    `step` or later (SIGINT to its process group, as Ctrl-C in its terminal); (exit code, the run's
    processes before the signal, stderr)."""
    proc = subprocess.Popen(command(model, out, *RESUMED), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    said, seen = b"", 0
    try:
        deadline = time.monotonic() + 600
        while seen < step:
            chunk = os.read(proc.stderr.fileno(), 65536)
            assert chunk and time.monotonic() < deadline, said.decode(errors="replace")[-3000:]
            said += chunk
            counts = re.findall(rb"train codecomplex:.*?\| *(\d+)/60 \[", said)
            seen = int(counts[-1]) if counts else 0
        tree = children(proc.pid) | {proc.pid}
        assert any("codeeval.training.worker" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
                   for p in alive(tree)), "the training's worker process should be running"
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        code = proc.wait(timeout=60)
        return code, tree, (said + proc.stderr.read()).decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT])
def test_a_training_stopped_at_a_random_step_resumes_to_the_same_predictions(env, tiny, uninterrupted, tmp_path,
                                                                              signum):
    step = random.Random(int(signum)).randint(14, 54)  # past the first epoch's checkpoint, before the last
    out = tmp_path / "run"
    code, tree, said = stop_at(env, tiny, out, step, signum)
    assert code == (-signal.SIGKILL if signum == signal.SIGKILL else 128 + signal.SIGINT), said[-2000:]
    deadline = time.monotonic() + 10
    while alive(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(tree), f"processes of the stopped run still alive: {alive(tree)}"
    assert not (out / "codecomplex" / "training" / "log.parquet").exists()
    resumed = run(env, tiny, out, *RESUMED)
    assert re.search(r"codecomplex: resuming from checkpoint-\d+, the last finished checkpoint", resumed.stderr), \
        resumed.stderr[-3000:]
    assert predictions(out, "codecomplex") == predictions(uninterrupted, "codecomplex")  # probabilities, bit for bit
    log, trained = training_log(out, "codecomplex")
    assert log == training_log(uninterrupted, "codecomplex")[0]
    assert trained["resumed_from"] and trained["resumed_from"].startswith("checkpoint-")


def test_two_processes_train_data_parallel_as_one_process_with_their_batches_together(env, tmp_path_factory):
    """Two CPU processes (gloo) with 6 examples each take the steps one process takes with 12: the same
    batches, the same losses; without dropout the same weights up to rounding."""
    model = str(ensure_tiny_roberta(tmp_path_factory.mktemp("tiny-roberta-no-dropout") / "model", Recipe(dropout=0.0)))
    common = ["--tasks", "codeclone", "--num_epochs", "1"]
    one, two = tmp_path_factory.mktemp("dp") / "one", tmp_path_factory.mktemp("dp") / "two"
    run(env, model, one, *common, "--batch_size", "12", "--num_processes", "1")
    done = run(env, model, two, *common, "--batch_size", "6", "--num_processes", "2")
    assert "training data-parallel in 2 processes" in done.stderr, done.stderr[-3000:]
    (log_one, trained_one), (log_two, trained_two) = training_log(one, "codeclone"), training_log(two, "codeclone")
    assert (trained_one["world_size"], trained_two["world_size"]) == (1, 2)
    assert [r["step"] for r in log_one] == [r["step"] for r in log_two] == [4]  # 48 examples, 12 a step
    for a, b in zip(log_one, log_two):
        assert abs(a["loss"] - b["loss"]) < 1e-5, (a, b)  # not doubled: the loss is each batch's mean
    assert (two / "codeclone" / "training" / "worker-1.log").is_file()
    assert [r["predicted"] for r in predictions(one, "codeclone")] == \
        [r["predicted"] for r in predictions(two, "codeclone")]


def test_the_documented_commands_run_as_written(env, smollm2_dir, tmp_path):
    """docs/classification.md's block, verbatim, in the checkout (runs under CODEEVAL_STORAGE): the oracle
    scores 1.0 with a diagonal matrix; SmolLM2 (a Llama, from its GGUF file) reads each record's class at
    its last non-pad token (pad = eos, as the scripts set it)."""
    repo = Path(__file__).resolve().parents[1]
    text = (repo / "docs" / "classification.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    assert (repo / ".cache" / "models" / "SmolLM2-135M-Instruct") == smollm2_dir  # where `make smollm2` put it
    storage = tmp_path / "storage"
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=repo, env={**env, "CODEEVAL_STORAGE": str(
        storage)}, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    oracle, smollm2 = (json.loads(p.read_text()) for p in sorted(storage.glob("*/results.json"),
                                                                 key=lambda p: "SmolLM2" in p.parent.name))
    for task, n in (("codecomplex", 8), ("codeclone", 16), ("codedefect", 16)):
        matrix = oracle[task]["confusion_matrix"]
        assert oracle[task]["accuracy"] == 1.0 and sum(matrix[i][i] for i in range(len(matrix))) == n
    (out,) = [p.parent for p in storage.glob("SmolLM2*/results.json")]
    rows = predictions(out, "codedefect")
    assert len(rows) == 6 and len({tuple(r["probabilities"]) for r in rows}) == 6  # each record its own logits
    log, trained = training_log(out, "codedefect")
    assert [r["step"] for r in log] == [2] and trained["train_samples"] == 12
    assert smollm2["codedefect"]["accuracy"] == sum(r["predicted"] == r["label"] for r in rows) / 6


def test_a_failed_training_says_why_and_what_waited_on_it(env, tiny, tmp_path):
    """A tokenizer file the worker cannot read: the run fails naming the training and the worker's own
    error, its predictions and score are Skipped, and `codeeval inspect` shows the same."""
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "model.safetensors"):
        (model / name).write_bytes((Path(tiny) / name).read_bytes())
    (model / "tokenizer.json").write_text("{}")
    out = tmp_path / "run"
    done = run(env, str(model), out, "--tasks", "codeclone", "--num_epochs", "1", code=1)
    said = " ".join(done.stderr.split())
    assert "train-codeclone: TrainingFailed: training process 0 of 1 exited with 1: KeyError" in said, said[-2000:]
    assert "not run, waiting on those: predict-codeclone-shard-000, score-codeclone" in said, said[-2000:]
    report = subprocess.run([sys.executable, "-m", "codeeval", "inspect", str(out)], env=env, capture_output=True,
                            text=True, timeout=120).stdout
    assert "## codeclone: not trained, 0 prediction shards written, 1 failed shards" in report, report
    assert "## train-codeclone failed" in report and "samples were in this shard" not in report, report


@pytest.mark.parametrize("case", ["label", "split", "model", "tokenizer", "sampling"])
def test_bad_input_ends_in_one_line_before_any_training(env, tiny, tmp_path, case):
    data, model, extra = tmp_path / "data", tiny, []
    if case == "label":
        lines = (FIXTURES / "codecomplex" / "data.jsonl").read_text().splitlines()
        lines[3] = json.dumps({**json.loads(lines[3]), "complexity": "exponential"})
        (data / "codecomplex").mkdir(parents=True)
        (data / "codecomplex" / "data.jsonl").write_text("\n".join(lines) + "\n")
        task, said = "codecomplex", r"codecomplex: record \d+ of the \w+ split: complexity 'exponential' is not one of"
    elif case == "split":
        (data / "codeclone").mkdir(parents=True)
        (data / "codeclone" / "train.jsonl").write_bytes((FIXTURES / "codeclone" / "train.jsonl").read_bytes())
        task, said = "codeclone", "codeclone: no validation split in"
    elif case == "model":
        data, model = FIXTURES, str(tmp_path / "vit")
        Path(model).mkdir()
        (Path(model) / "config.json").write_text(json.dumps({"model_type": "vit"}))
        task, said = "codedefect", "codedefect fine-tunes .* as a sequence classifier, which cannot be built: " \
                                   "transformers has no sequence-classification model for its type 'vit'"
    elif case == "tokenizer":  # transformers 5 would build a tokenizer of special tokens alone: no training on that
        data, model = FIXTURES, str(tmp_path / "weights-only")
        Path(model).mkdir()
        for name in ("config.json", "model.safetensors"):
            (Path(model) / name).write_bytes((Path(tiny) / name).read_bytes())
        task, said = "codedefect", "codedefect fine-tunes .* as a sequence classifier, which cannot be built: " \
                                   r"its folder has no tokenizer \(tokenizer.json"
    else:
        data, task, extra = FIXTURES, "codedefect", ["--n_samples", "5"]
        said = "--n_samples does not apply to codedefect, a classification task"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "codeeval", "run", "--model", model, "--tasks", task, "--data-dir",
                           str(data), "--output-dir", str(tmp_path / "out"), *extra], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert re.match(rf"codeeval: error: {said}", done.stderr), done.stderr
    assert time.monotonic() - started < 30 and not (tmp_path / "out").exists()
