"""Shared set-up of the Docker tests: the engine and the execution image, for real.

No skipping for want of Docker: the engine is installed/started by
scripts/ensure-docker.sh and the image built by codeeval/containers/build.sh (both idempotent,
both fast when there is nothing to do); a failure there fails the tests.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
LABEL = "codeeval.sandbox"


def ensure_images() -> str:
    for command in (["bash", "scripts/ensure-docker.sh"], [sys.executable, "-m", "codeeval", "images", "build"]):
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    from codeeval.executors.docker import images

    return images.python_image()


def humaneval_programs(n: int | None = None):
    from codeeval.executors.base import Program

    with gzip.open(DATA / "humaneval" / "HumanEval.jsonl.gz", "rt") as fh:
        problems = [json.loads(line) for line in fh]
    return [
        Program(p["task_id"], p["prompt"] + p["canonical_solution"] + "\n" + p["test"] + "\n"
                + f"check({p['entry_point']})", timeout_s=3.0, guard=True)
        for p in problems[:n]
    ]


def mbpp_programs(setup: bool = False):
    """The MBPP reference oracle: the test split (task ids 11-510), each reference solution with
    its asserts, as bigcode runs it (`setup=False`: test_setup_code ignored, so task 367 fails
    with a NameError) or with test_setup_code between the code and the asserts."""
    from codeeval.executors.base import Program

    with open(DATA / "mbpp" / "mbpp.jsonl") as fh:
        records = [r for r in map(json.loads, fh) if 11 <= int(r["task_id"]) <= 510]
    return [
        Program(str(r["task_id"]), r["code"] + "\n" + (r["test_setup_code"] + "\n" if setup else "")
                + "\n".join(r["test_list"]), timeout_s=3.0, guard=True)
        for r in records
    ]


@contextmanager
def busy_cores():
    """Keep every core busy (one CPU-bound process per core, at least two) while the block
    runs, as other jobs on a shared machine would; the processes are killed whatever happens."""
    hogs = []
    try:
        for _ in range(max(2, os.cpu_count() or 1)):
            hogs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


@contextmanager
def one_crowded_cpu(spinners: int = 2, sessions: bool = False):
    """This thread (and what it starts) on one CPU with `spinners` busy processes: a third of it each.
    `sessions`: each spinner in a session of its own, as a harness's step is: the kernel's autogroups
    share a CPU between sessions first, so spinners in this test's session would crowd a step in
    its own session to half of the CPU only, however many they are."""
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=sessions)
            for _ in range(spinners)]
    try:
        time.sleep(0.1)
        yield
    finally:
        os.sched_setaffinity(0, saved)
        for hog in hogs:
            hog.kill()
            hog.wait()


def our_containers(owner: str | None = None, sandbox_id: str | None = None) -> list[str]:
    """Names of the sandbox containers of one owner process or one sandbox (never every run's:
    other runs share the engine), running or not."""
    assert owner or sandbox_id, "count only your own containers: give an owner or a sandbox id"
    args = ["docker", "ps", "-a", "--filter", f"label={LABEL}" + (f"={sandbox_id}" if sandbox_id else "")]
    if owner:
        args += ["--filter", f"label=codeeval.owner={owner}"]
    out = subprocess.run([*args, "--format", "{{.Names}}"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def _proc(name: str):
    """(pid, text of /proc/<pid>/<name>) for every process still alive while it is read."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                yield pid, Path(f"/proc/{pid}/{name}").read_text(errors="replace")
            except OSError:
                continue


def containers_of(pids, sandbox_id: str = "") -> list[str]:
    """The sandbox containers these processes (of this host's boot) started, running or not."""
    from codeeval.executors.docker.engine import connect
    from codeeval.executors.docker.owners import containers_of as of

    client = connect()
    try:
        return of(client.api, pids, sandbox_id)
    finally:
        client.close()


def container_ids(names: list[str]) -> list[str]:
    if not names:
        return []
    out = subprocess.run(["docker", "inspect", "--format", "{{.Id}}", *names], capture_output=True, text=True)
    return out.stdout.split()


def processes_in(ids: list[str]) -> list[str]:
    """Host pids whose cgroup belongs to one of the given container ids."""
    return [pid for pid, cgroup in _proc("cgroup") if any(cid in cgroup for cid in ids)]


def unstretched(**kw):
    """Limits whose CPU limits a slow machine never stretches (a reference speed no machine
    is slower than): tests that pin the CPU used at the limit need the nominal limit."""
    from codeeval.executors.base import Limits

    return Limits(speed_reference_s=1e9, **kw)
