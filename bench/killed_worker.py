"""A cpu worker SIGKILLed mid-run, and the re-run that resumes from the finished shards.

A Prefect server (scripts/prefect-server.sh) on a free port, the gpu and cpu pools with
the package's deployments (`codeeval deploy`), one worker each; `evaluate` with the reference solutions on
HumanEval in the Docker sandbox; the cpu worker's process group is SIGKILLed after --kill-after
seconds, a new cpu worker starts, and the same run is started again. Prints the shard files on
disk at the kill, the re-run's reused counts and its exit, and the containers left behind.

    .venv/bin/python bench/killed_worker.py [--data-dir ../shared/data] [--kill-after 60]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PREFECT = str(REPO / ".venv" / "bin" / "prefect")


def tree(root: int) -> list[int]:
    """`root` and its descendants (flow-run processes may leave the worker's process group)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                parents[int(name)] = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += [child for child, parent in parents.items() if parent == pid]
    return found


def left_behind(pids: list[int]) -> list[str]:
    """Sandbox containers these processes started (other runs share the engine: never theirs)."""
    from codeeval.executors.docker.engine import connect
    from codeeval.executors.docker.owners import containers_of

    client = connect()
    try:
        return containers_of(client.api, pids)
    finally:
        client.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--kill-after", type=float, default=60.0, help="seconds after the run starts")
    ap.add_argument("--shard-size", type=int, default=15)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="killed-worker-"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect-home"), "PORT": str(port),
           "PUBLIC_URL": f"http://127.0.0.1:{port}", "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT_WORKER_QUERY_SECONDS": "2", "COLUMNS": "250"}
    procs: dict[str, subprocess.Popen] = {}

    def start(name: str, *command: str) -> None:
        procs[name] = subprocess.Popen(command, env=env, cwd=REPO, start_new_session=True,
                                       stdout=open(tmp / f"{name}.log", "w"), stderr=subprocess.STDOUT)

    def cli(*a: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([PREFECT, *a], env=env, cwd=REPO, capture_output=True, text=True, **kw)

    out = tmp / "run"
    params = json.dumps({"config": {"model": "reference", "tasks": ["humaneval"], "allow_code_execution": True,
                                    "data_dir": args.data_dir, "shard_size": args.shard_size,
                                    "output_dir": str(out)}})
    try:
        start("server", str(REPO / "scripts" / "prefect-server.sh"))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        subprocess.run([str(Path(PREFECT).with_name("codeeval")), "deploy", "--models-file", str(REPO / "models.yaml"),
                        "--working-dir", str(REPO)], env=env, cwd=REPO, check=True)
        start("worker-gpu", PREFECT, "worker", "start", "--pool", "gpu", "--limit", "1")
        start("worker-cpu", PREFECT, "worker", "start", "--pool", "cpu")
        started = time.monotonic()
        first = subprocess.Popen([PREFECT, "deployment", "run", "evaluate/evaluate", "--params", params],
                                 env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        first.wait()
        time.sleep(max(0.0, args.kill_after - (time.monotonic() - started)))
        killed = tree(procs["worker-cpu"].pid)
        for pid in killed:  # the worker and the flow runs it started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        procs["worker-cpu"].wait()
        on_disk = {stage: len(list((out / "humaneval" / stage).glob("shard-*.parquet")))
                   for stage in ("generations", "executions")}
        print(f"killed the cpu worker at {time.monotonic() - started:.0f} s; shard files on disk: {on_disk}")
        time.sleep(3)
        start("worker-cpu-2", PREFECT, "worker", "start", "--pool", "cpu")
        t0 = time.monotonic()
        again = cli("deployment", "run", "evaluate/evaluate", "--watch", "--params", params, timeout=1800)
        print(f"re-run: exit {again.returncode} in {time.monotonic() - t0:.0f} s")
        results = json.loads((out / "results.json").read_text())
        detail = results["codeeval"]["tasks"]["humaneval"]
        print(f"pass@1 {results['humaneval']['pass@1']}; reused {detail['reused']}")
        print(f"containers left: {len(left_behind(killed + tree(os.getpid())))}")
        return 0 if again.returncode == 0 else 1
    finally:
        for proc in procs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
