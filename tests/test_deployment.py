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

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(Path(sys.executable).with_name("prefect"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """The documented server command (scripts/prefect-server.sh, `make prefect-server`) on a free
    port, with its own PREFECT_HOME, in a copy of the checkout that workers start flow runs in."""
    port = free_port()
    project = tmp_path / "project"
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PORT": str(port),
           "PUBLIC_URL": f"http://127.0.0.1:{port}", "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT": PREFECT, "CODEEVAL_CHECKOUT": str(project),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1"}
    procs = []

    def start(*args, log, extra_env=None):
        command = args if args[0].endswith(".sh") else [PREFECT, *args]
        proc = subprocess.Popen(command, env={**env, **(extra_env or {})}, cwd=project, start_new_session=True,
                                stdout=open(tmp_path / log, "w"), stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    shutil.copytree(REPO, project, ignore=shutil.ignore_patterns(".venv", ".git", ".cache", "runs", "__pycache__",
                                                                 ".prefect", "leaderboard"))
    start(str(project / "scripts" / "prefect-server.sh"), log="server.log")
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


def api(env, path: str, body: dict) -> list:
    request = urllib.request.Request(env["PREFECT_API_URL"] + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def flow_runs(env, names: list[str]) -> dict[str, list[dict]]:
    found = api(env, "/flow_runs/filter", {"flow_runs": {"name": {"any_": names}}})
    return {name: [r for r in found if r["name"] == name] for name in names}


def chromium_page(url: str, tmp: Path, name: str) -> str:
    """The page as headless Chromium renders it (its DOM), with a screenshot kept in `tmp`."""
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            f"--user-data-dir={tmp / 'chromium-profile'}", "--virtual-time-budget=20000", "--window-size=1400,1000"]
    shot = subprocess.run([*base, f"--screenshot={tmp / name}", url], capture_output=True, timeout=180, cwd=tmp)
    assert shot.returncode == 0 and (tmp / name).stat().st_size > 10_000, shot.stderr[-2000:]
    return subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout


def deploy(env, tmp):
    """The pools and prefect.yaml's deployments, as docs/deployment.md does it; the prefect CLI."""
    env.update(PREFECT_WORKER_QUERY_SECONDS="2", COLUMNS="250")
    cli = lambda *args: subprocess.run([PREFECT, *args], env=env, cwd=tmp / "project", capture_output=True,  # noqa: E731
                                       text=True, timeout=300)
    for pool in ("gpu", "cpu"):
        assert cli("work-pool", "create", pool, "--type", "process").returncode == 0
    deployed = cli("--no-prompt", "deploy", "--all")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    return cli


def test_evaluate_deployment_runs_shards_on_the_gpu_and_cpu_pools(server, data_dir):
    """prefect.yaml deployed as documented; a gpu and a cpu worker; `evaluate` runs its
    generation shards on the gpu pool and its execution shards on the cpu pool, a re-run starts
    no shard, and a failing model shows up in the UI as a red shard with its artifact."""
    env, start, tmp = server
    cli = deploy(env, tmp)
    listed = cli("deployment", "ls").stdout
    for name in ("evaluate/evaluate", "nightly-leaderboard/nightly-leaderboard", "generate-shard/generate-shard",
                 "execute-shard/execute-shard"):
        assert name in listed, listed
    nightly = cli("deployment", "inspect", "nightly-leaderboard/nightly-leaderboard")
    assert "0 2 * * *" in nightly.stdout and "UTC" in nightly.stdout, nightly.stdout
    start("worker", "start", "--pool", "gpu", "--limit", "1", log="worker-gpu.log")
    start("worker", "start", "--pool", "cpu", log="worker-cpu.log")
    params = {"config": {"model": "reference", "tasks": ["humaneval"], "allow_code_execution": True,
                         "executor": "local", "data_dir": str(data_dir), "limit": 4, "shard_size": 2,
                         "output_dir": str(tmp / "deployed-run")}}
    for attempt in (1, 2):
        result = cli("deployment", "run", "evaluate/evaluate", "--watch", "--params", json.dumps(params))
        assert result.returncode == 0 and "Completed" in result.stdout, \
            result.stdout[-3000:] + result.stderr[-3000:] + (tmp / "worker-cpu.log").read_text()[-3000:]
        results = json.loads((tmp / "deployed-run" / "results.json").read_text())
        assert results["humaneval"] == {"pass@1": 1.0}
        reused = results["codeeval"]["tasks"]["humaneval"]["reused"]
        assert reused == ({"generate": [0, 2], "execute": [0, 2]} if attempt == 1 else
                          {"generate": [2, 2], "execute": [2, 2]})
    shards = [f"{stage}-humaneval-shard-00{i}" for stage in ("generate", "execute") for i in (0, 1)]
    runs = flow_runs(env, shards)
    for name in shards:
        (run,) = runs[name]  # the second evaluate run started none
        assert run["state_type"] == "COMPLETED" and run["parent_task_run_id"]
        assert run["work_pool_name"] == ("gpu" if name.startswith("generate") else "cpu"), run

    # a model that fails to load: the run page shows a red generation shard
    model = tmp / "broken-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    params["config"].update(model=str(model), output_dir=str(tmp / "broken-run"), limit=2)
    result = cli("deployment", "run", "evaluate/evaluate", "--watch", "--params", json.dumps(params))
    assert "Failed" in result.stdout, result.stdout[-3000:]
    (parent,) = flow_runs(env, ["broken-model-humaneval"])["broken-model-humaneval"]
    assert parent["state_type"] == "FAILED"
    tasks = {t["name"]: t for t in api(env, "/task_runs/filter", {"flow_runs": {"id": {"any_": [parent["id"]]}}})}
    assert tasks["generate-humaneval-shard-000"]["state_type"] == "FAILED"
    assert tasks["execute-humaneval-shard-000"]["state_name"] == "Skipped"
    assert tasks["score-humaneval"]["state_name"] == "Skipped"
    (shard,) = [r for r in flow_runs(env, ["generate-humaneval-shard-000"])["generate-humaneval-shard-000"]
                if r["state_type"] != "COMPLETED"]  # the one of the broken model's run
    assert shard["state_type"] == "FAILED" and shard["work_pool_name"] == "gpu"
    (artifact,) = api(env, "/artifacts/filter", {"artifacts": {"key": {"any_": ["failures-humaneval-generate-shard-00000"]},
                                                               "flow_run_id": {"any_": [shard["id"]]}}})
    assert "| HumanEval/0 | 0 | error |" in artifact["data"] and "broken-run" in artifact["data"]
    if CHROMIUM:
        base = env["PREFECT_API_URL"].removesuffix("/api")
        dom = chromium_page(f"{base}/runs/flow-run/{parent['id']}", tmp, "ui-evaluate-run.png")
        assert "generate-humaneval-shard-000" in dom
        dom = chromium_page(f"{base}/runs/flow-run/{shard['id']}", tmp, "ui-failed-shard.png")
        assert "generate-humaneval-shard-000" in dom


def test_shards_travel_between_hosts_through_an_fsspec_store(server, data_dir):
    """CODEEVAL_STORAGE as a URL and two hosts with nothing shared but the store (each worker its
    own CODEEVAL_CACHE, hence its own mirror): generation shards written on the gpu host reach
    the cpu host's execution shards and score through the store, and so does results.json."""
    env, start, tmp = server
    cli = deploy(env, tmp)
    store = tmp / "store"
    for pool in ("gpu", "cpu"):
        start("worker", "start", "--pool", pool, log=f"worker-{pool}.log",
              extra_env={"CODEEVAL_STORAGE": store.as_uri(), "CODEEVAL_CACHE": str(tmp / f"host-{pool}")})
    params = {"config": {"model": "reference", "tasks": ["humaneval"], "allow_code_execution": True,
                         "executor": "local", "data_dir": str(data_dir), "limit": 3, "shard_size": 2}}
    result = cli("deployment", "run", "evaluate/evaluate", "--watch", "--params", json.dumps(params))
    assert result.returncode == 0 and "Completed" in result.stdout, \
        result.stdout[-3000:] + (tmp / "worker-cpu.log").read_text()[-3000:] + (tmp / "worker-gpu.log").read_text()[-2000:]
    (results,) = store.rglob("results.json")
    assert json.loads(results.read_text())["humaneval"] == {"pass@1": 1.0}

    def files(root):
        return sorted("/".join(p.parts[-2:]) for p in root.rglob("shard-*.parquet"))

    shards = [f"{stage}/shard-0000{i}.parquet" for stage in ("executions", "generations") for i in (0, 1)]
    assert files(store) == shards
    assert files(tmp / "host-gpu") == shards[2:]  # the gpu host wrote generations and read nothing else
    assert files(tmp / "host-cpu") == shards  # the cpu host fetched the generations from the store
