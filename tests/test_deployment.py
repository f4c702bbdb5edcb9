"""prefect.yaml's `evaluate` deployment on a real Prefect server, process work pool and worker."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    port = free_port()
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"),
           "PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_SERVER_API_PORT": str(port),
           "PREFECT_UI_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    procs = []

    def start(*args, log):
        proc = subprocess.Popen([PREFECT, *args], env=env, cwd=tmp_path / "project", start_new_session=True,
                                stdout=open(tmp_path / log, "w"), stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    shutil.copytree(REPO, tmp_path / "project", ignore=shutil.ignore_patterns(".venv", ".git", ".cache", "runs", "__pycache__"))
    start("server", "start", "--host", "127.0.0.1", "--port", str(port), log="server.log")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        pytest.fail("prefect server did not start: " + (tmp_path / "server.log").read_text()[-2000:])
    try:
        yield env, start, tmp_path
    finally:
        for proc in procs:  # the worker stops on SIGINT only; kill whole groups
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def test_evaluate_deployment_runs_on_a_process_worker(server, data_dir):
    env, start, tmp = server
    cli = lambda *args: subprocess.run([PREFECT, *args], env=env, cwd=tmp / "project", capture_output=True,  # noqa: E731
                                       text=True, timeout=180)
    assert cli("work-pool", "create", "codeeval-process", "--type", "process").returncode == 0
    deployed = cli("--no-prompt", "deploy", "--all")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    start("worker", "start", "--pool", "codeeval-process", log="worker.log")
    params = {"config": {"model": "reference", "tasks": ["humaneval"], "allow_code_execution": True,
                         "executor": "local", "data_dir": str(data_dir), "limit": 5,
                         "output_dir": str(tmp / "deployed-run")}}
    result = cli("deployment", "run", "evaluate/evaluate", "--watch", "--params", json.dumps(params))
    assert result.returncode == 0 and "Completed" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((tmp / "deployed-run" / "results.json").read_text())
    assert results["humaneval"] == {"pass@1": 1.0}
    assert results["codeeval"]["tasks"]["humaneval"]["samples"] == 5
