"""The private Prefect API server a CLI run starts when none is configured (codeeval/prefect_api.py).

It is told to stop when the flow ends and the CLI returns at once; the server then finishes
writing the run's last events by itself. These tests read what the Prefect UI would show from
its database afterwards, and the one line a run prints when that server cannot start.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env(home: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1", **extra)
    return env


def _run(data_dir: Path, out: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "codeeval", "run", "--model", "reference", "--tasks", "humaneval", "--limit", "3",
         "--allow_code_execution", "--executor", "local", "--data-dir", str(data_dir), "--output-dir", str(out)],
        env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)


def _servers_of(home: Path) -> set[int]:
    """Live private servers whose PREFECT_HOME is `home` (other runs' servers share the machine)."""
    mine = f"PREFECT_HOME={home}".encode()
    found = set()
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            if b"codeeval.prefect_api" in cmdline and mine in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                found.add(int(entry))
        except (OSError, ValueError):
            continue
    return found


def test_a_finished_run_has_every_task_run_recorded_and_its_server_gone(data_dir, tmp_path):
    home = tmp_path / "prefect-home"
    done = _run(data_dir, tmp_path / "out", _env(home))
    assert done.returncode == 0, done.stderr[-3000:]
    deadline = time.monotonic() + 15  # the server's own shutdown limit is 10 s
    while _servers_of(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _servers_of(home), "the private server outlived its run by more than its shutdown limit"

    with sqlite3.connect(home / "prefect.db") as db:
        flows = db.execute("SELECT state_type FROM flow_run").fetchall()
        tasks = db.execute("SELECT name, state_type FROM task_run").fetchall()
    assert flows == [("COMPLETED",)]
    # the last of them ends a moment before the CLI returns
    assert sorted(tasks) == [("execute-humaneval-shard-000", "COMPLETED"), ("generate-humaneval-shard-000", "COMPLETED"),
                             ("load-humaneval", "COMPLETED"), ("score-humaneval", "COMPLETED")]


def test_a_server_that_cannot_start_fails_the_run_in_one_line_with_its_cause(data_dir, tmp_path):
    env = _env(tmp_path / "prefect-home",
               PREFECT_API_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{tmp_path}/no-such-dir/prefect.db")
    started = time.monotonic()
    done = _run(data_dir, tmp_path / "out", env)
    assert done.returncode == 1, done.stderr[-3000:]
    assert time.monotonic() - started < 60
    assert done.stderr.strip().splitlines()[-1] == (
        "codeeval: run failed: the temporary Prefect API server exited with status 3: "
        "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) unable to open database file")
    assert not (tmp_path / "out" / "humaneval" / "metrics.json").exists()
