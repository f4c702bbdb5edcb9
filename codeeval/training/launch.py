"""Starting a training's worker processes and following them.

One process (`python -m codeeval.training.worker`), or one per device with the environment that
`accelerate launch` gives its processes (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT on this host),
so that the Trainer trains data-parallel: NCCL on GPUs, gloo on CPUs. Each process dies with the
thread that started it (a killed CLI or worker leaves none behind) and stays in its process group
(Ctrl-C in the terminal stops it at once, as it stops `accelerate launch`'s processes; the CLI itself
may take a few seconds more). Rank 0's progress lines reach `on_event`; each process's
stderr goes to `worker-<rank>.log` beside the job, whose last line is the error a failure reports.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from codeeval.core.errors import Explained
from codeeval.core.processes import die_with_parent

DIST_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class TrainingFailed(Explained):
    """A worker process of the training failed; the message is its own last error line."""


def processes(requested: int) -> int:
    """How many processes train: `requested`, else one per visible GPU, else one."""
    if requested:
        return requested
    from codeeval.generation.hf.devices import visible_devices

    return max(1, len(visible_devices()))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def environment(rank: int, world: int, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DIST_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    if world > 1:
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        if "OMP_NUM_THREADS" not in os.environ:  # CPU processes share the cores, as torchrun has them
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // world))
    return env


def log_path(job_path: Path, rank: int) -> Path:
    return job_path.parent / f"worker-{rank}.log"


def last_error(path: Path) -> str:
    """The last line of a worker's log that says something (a traceback's last line)."""
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line and not line.startswith(("warnings.warn", "^"))]
    return lines[-1][:400] if lines else ""


def _stop_all_if_one_fails(procs: list) -> None:
    """A process that failed leaves its peers waiting in a collective for ever: stop them."""
    while any(p.poll() is None for p in procs):
        if any(p.poll() not in (None, 0) for p in procs):
            for p in procs:
                if p.poll() is None:
                    p.kill()
            return
        threading.Event().wait(0.5)


def run(job_path: Path, world: int, on_event: Callable[[dict], None]) -> None:
    """Runs the job in `world` processes and waits for them; TrainingFailed when one fails (the
    others are then stopped)."""
    parent, port = os.getpid(), _free_port()
    procs = []
    try:
        for rank in range(world):
            with open(log_path(job_path, rank), "wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "codeeval.training.worker", str(job_path)],
                    env=environment(rank, world, port), stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE if rank == 0 else log, stderr=log,
                    preexec_fn=lambda: die_with_parent(parent)))
        threading.Thread(target=_stop_all_if_one_fails, args=(procs,), daemon=True).start()
        for line in procs[0].stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # something else printed on stdout
            if isinstance(event, dict):
                on_event(event)
        codes = [p.wait() for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            if p.stdout is not None:
                p.stdout.close()
    failed = [(rank, code) for rank, code in enumerate(codes) if code != 0]
    if failed:
        # the rank that raised says why; the others only saw their peer go
        reasons = [(rank, code, last_error(log_path(job_path, rank))) for rank, code in failed]
        rank, code, why = next((r for r in reasons if "Error" in r[2]), reasons[0])
        raise TrainingFailed(f"training process {rank} of {world} exited with {code}: {why or 'no error logged'}"
                             f" (log: {log_path(job_path, rank)})")
