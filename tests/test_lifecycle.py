"""A killed or terminated `codeeval run` leaves nothing behind and resumes where it stopped.

The runs here start their own temporary Prefect API server (no PREFECT_API_URL), the case in
which Prefect's own ephemeral server used to outlive a SIGKILLed CLI.
"""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from docker_env import containers_of, ensure_images
from procs import alive, children

N_PROBLEMS, SHARD = 12, 2


def owned_containers(pid: int) -> list[str]:
    """The run's containers (its CLI process owns them), never another run's on the shared engine."""
    return containers_of([pid])


@pytest.fixture(scope="module")
def workload(data_dir, tmp_path_factory):
    """Saved generations for 12 HumanEval problems: each program sleeps 0.4 s; odd ones are wrong."""
    ensure_images()
    root = tmp_path_factory.mktemp("lifecycle")
    with gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        records = [json.loads(line) for line in fh][:N_PROBLEMS]
    lines = []
    for i, r in enumerate(records):
        body = r["canonical_solution"] if i % 2 == 0 else "    return None\n"
        lines.append(json.dumps({"task_id": r["task_id"],
                                 "solution": "import time\ntime.sleep(0.4)\n" + r["prompt"] + body}))
    generations = root / "gens.jsonl"
    generations.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(root / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    return root, generations, env


def command(workload, data_dir, out: Path, executor: str = "docker") -> list[str]:
    _, generations, _ = workload
    return [sys.executable, "-m", "codeeval", "run", "--tasks", "humaneval", "--limit", str(N_PROBLEMS),
            "--shard_size", str(SHARD), "--n_workers", "1", "--load_generations_path", str(generations),
            "--allow_code_execution", "--data-dir", str(data_dir), "--output-dir", str(out), "--executor", executor]


def metrics_of_a_clean_run(workload, data_dir) -> dict:
    root, _, env = workload
    out = root / "clean"
    if not (out / "humaneval" / "metrics.json").exists():
        proc = subprocess.Popen(command(workload, data_dir, out), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        # its containers are stopped while it writes its summary, and gone before it returns
        assert not owned_containers(proc.pid), f"containers of the finished run: {owned_containers(proc.pid)}"
    return json.loads((out / "humaneval" / "metrics.json").read_text())


def running_programs(pid: int, executor: str) -> bool:
    if executor == "docker":
        return bool(owned_containers(pid))
    return any(p != pid for p in children(pid) if "runner.py" in Path(f"/proc/{p}/cmdline").read_text(errors="replace"))


def stop_mid_run(workload, data_dir, out: Path, signum: int,
                 executor: str) -> tuple[int, int, str, set[int], float]:
    """Start a run, wait for its second execution shard, send `signum`; (pid, exit code, stderr,
    the run's processes before the signal, seconds from the signal to the exit)."""
    _, _, env = workload
    err = open(out.parent / f"{out.name}.stderr", "w+")
    proc = subprocess.Popen(command(workload, data_dir, out, executor), env=env, stdout=subprocess.DEVNULL,
                            stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        # mid-run: two execution shards on disk, and a later shard's programs running
        while not ((out / "humaneval" / "executions" / "shard-00001.parquet").exists()
                   and running_programs(proc.pid, executor)):
            assert proc.poll() is None, open(err.name).read()[-3000:]
            assert time.monotonic() < deadline, "the run never reached its third execution shard"
            time.sleep(0.1)
        assert not (out / "humaneval" / "metrics.json").exists(), "the workload finished too fast to interrupt"
        tree = children(proc.pid) | {proc.pid}
        os.kill(proc.pid, signum)
        sent = time.monotonic()
        code = proc.wait(timeout=60)
        return proc.pid, code, open(err.name).read(), tree, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def assert_nothing_left(pid: int, tree: set[int], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while (alive(tree) or owned_containers(pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(tree), f"processes of the run still alive: {alive(tree)}"
    assert not owned_containers(pid), f"containers of the run still there: {owned_containers(pid)}"


def resume(workload, data_dir, out: Path, executor: str) -> str:
    _, _, env = workload
    done = subprocess.run(command(workload, data_dir, out, executor), env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("signum,executor", [(signal.SIGKILL, "docker"), (signal.SIGTERM, "docker"),
                                             (signal.SIGKILL, "local")])
def test_a_stopped_run_leaves_nothing_behind_and_resumes(workload, data_dir, signum, executor):
    root, _, _ = workload
    expected = metrics_of_a_clean_run(workload, data_dir)
    out = root / f"stopped-{signal.Signals(signum).name}-{executor}"
    pid, code, stderr, tree, took = stop_mid_run(workload, data_dir, out, signum, executor)
    # children: the Prefect server, and the local sandbox's processes (the Docker sandbox has no client
    # process since it drives the engine through the SDK: its containers were seen by running_programs)
    assert len(tree) > (1 if executor == "docker" else 2), "the run should have a Prefect server (and sandbox processes)"
    if signum == signal.SIGTERM:
        assert code == 128 + signal.SIGTERM and took < 10, (code, took, stderr[-2000:])
        assert "interrupted (SIGTERM); finished shards are kept" in stderr
    else:
        assert code == -signal.SIGKILL
    assert_nothing_left(pid, tree)
    text = resume(workload, data_dir, out, executor)
    # the next local sandbox removed the scratch directories the killed one left
    assert not list(Path(tempfile.gettempdir()).glob(f"codeeval-scratch-{pid}-*"))
    done = int(text.split("generation and ")[1].split("/")[0])
    assert 2 <= done < N_PROBLEMS // SHARD, text
    assert json.loads((out / "humaneval" / "metrics.json").read_text()) == expected
    assert expected["passed"] == N_PROBLEMS // 2


def test_a_terminated_run_whose_programs_hang_exits_within_its_grace(workload, data_dir, tmp_path):
    """SIGTERM while every program blocks (sleeps toward the 20 s limit of humanevalplus-bigcode,
    bigcode's HumanEval+ program): Prefect's own SIGTERM handler unwinds through its task runner,
    which waits for the shard threads; the CLI's watchdog still ends the process STOP_GRACE_S
    after the signal, and its containers go."""
    from codeeval.cli import STOP_GRACE_S

    _, _, env = workload
    with gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        record = json.loads(fh.readline())
    generations = tmp_path / "hang.jsonl"
    generations.write_text(json.dumps({"task_id": record["task_id"], "solution": "import time\ntime.sleep(600)\n"}) + "\n")
    out = tmp_path / "run"
    cmd = command(workload, data_dir, out)
    cmd[cmd.index("--load_generations_path") + 1] = str(generations)
    cmd[cmd.index("--limit") + 1] = "1"
    cmd[cmd.index("--tasks") + 1] = "humanevalplus-bigcode"  # 20 s: humaneval's 3 s would end the sleep
    err = open(tmp_path / "stderr", "w+")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not owned_containers(proc.pid):  # the sandbox is up; the program starts at once
            assert proc.poll() is None and time.monotonic() < deadline, open(err.name).read()[-3000:]
            time.sleep(0.1)
        time.sleep(3)
        tree = children(proc.pid) | {proc.pid}
        os.kill(proc.pid, signal.SIGTERM)
        sent = time.monotonic()
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 128 + signal.SIGTERM and took < STOP_GRACE_S + 3, (code, took, open(err.name).read()[-2000:])
    assert_nothing_left(proc.pid, tree)


def test_half_written_files_of_dead_writers_are_swept(tmp_path):
    from codeeval.core import artifacts, files

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / "t" / "executions" / f".shard-00001.parquet.{dead}.12345678{files.TMP_SUFFIX}"
    live = tmp_path / "t" / "executions" / f".shard-00002.parquet.{os.getpid()}.abcdefgh{files.TMP_SUFFIX}"
    for path in (stale, live):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    artifacts.write_json(tmp_path / "t" / "metrics.json", {"ok": 1})
    assert files.sweep_partial(tmp_path) == [stale]
    assert live.exists() and not stale.exists() and (tmp_path / "t" / "metrics.json").exists()


def test_a_finished_shard_is_recognised_by_its_key(tmp_path):
    """A kill between a shard's rename and Prefect's cache record must not make the next run
    redo the shard: the file itself says which inputs it was written for."""
    import pyarrow as pa

    from codeeval.core import artifacts

    schema = pa.schema([("task_id", pa.string())])
    path = artifacts.write_table(tmp_path / "shard-00000.parquet", [{"task_id": "a"}], schema, key="k1")
    assert artifacts.written_with(path, "k1")
    assert not artifacts.written_with(path, "k2")
    assert not artifacts.written_with(artifacts.write_table(tmp_path / "old.parquet", [], schema), "k1")
    (tmp_path / "torn.parquet").write_bytes(b"PAR1 not a file")
    assert not artifacts.written_with(tmp_path / "torn.parquet", "k1")
    assert not artifacts.written_with(tmp_path / "missing.parquet", "k1")
