"""A program near its limit on a crowded host, under runc and runsc (issue 51): MBPP 123's
oracle (bigcode's program, about 2.8 s of its 3 s limit) in a one-container sandbox beside
--busy containers that spin (`while True: pass`, no CPU limit, runc, at the sandbox's cgroup
level: /docker), --reps times a mode, the modes alternating round by round:
  runc        the engine's default runtime: the clock less the programs' own schedstat delay;
  runsc       gVisor with the host's counts of the container's host tasks (executors/docker/
              hostclocks.py): their run-queue delay off the clock, their CPU time a bound of gVisor's;
  runsc-bare  gVisor without them (gVisor's /proc has no schedstat, the delay reads 0; its CPU
              time counts the waits).
Prints each run's verdict, detail, cpu_s (the server's), host_cpu_s (the container's host cgroup
over the run, the server's share included) and wall seconds, then a summary per mode.

    .venv/bin/python bench/gvisor_crowded.py [--reps 4] [--busy 4] [--modes runc,runsc,runsc-bare]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's codeeval, not an installed one

from docker_env import mbpp_programs  # noqa: E402

from codeeval.executors.docker import worker as docker_worker  # noqa: E402
from codeeval.executors.docker.hostclocks import cpu_file  # noqa: E402
from codeeval.executors.docker.sandbox import DockerSandbox  # noqa: E402

TASK = "123"


class NoHostClocks:
    """HostClocks that measures nothing and mounts nothing: the server finds no file, so it reads its
    own /proc (no delay) and gVisor's CPU time alone."""
    flags: list = []

    def follow(self, pid: int, name: str = "") -> bool:
        return False

    def close(self) -> None:
        pass


@contextmanager
def busy_containers(n: int, image: str):
    names = [f"codeeval-bench-busy-{uuid.uuid4().hex[:8]}" for _ in range(n)]
    try:
        for name in names:
            subprocess.run(["docker", "run", "-d", "--rm", "--name", name, "--network", "none", image,
                            "python3", "-c", "while True: pass"], check=True, capture_output=True)
        time.sleep(1.0)
        yield names
    finally:
        subprocess.run(["docker", "rm", "-f", *names], capture_output=True)


def host_cpu(worker) -> float:
    """The CPU seconds of the container's host cgroup (cpuacct.usage): under runsc, what the host ran
    for the Sentry and its stubs, the server's share included."""
    path, parse = cpu_file(worker.container.host_pid())
    with open(path, "rb") as fh:
        return parse(fh.read()) / 1e9


def run_once(mode: str, program) -> tuple:
    runtime = "runc" if mode == "runc" else "runsc"
    docker_worker.HostClocks = NoHostClocks if mode == "runsc-bare" else REAL_CLOCKS
    with DockerSandbox(n_workers=1, container_runtime=runtime) as box:
        box.start()
        worker = box._workers[0]
        before = host_cpu(worker)
        (outcome,) = box.run([program])
        host_s = host_cpu(worker) - before
    return outcome.status, outcome.detail, outcome.cpu_s, outcome.duration_s, worker.hello.get("queued"), host_s


REAL_CLOCKS = docker_worker.HostClocks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--busy", type=int, default=4)
    parser.add_argument("--modes", default="runc,runsc,runsc-bare")
    args = parser.parse_args()
    modes = args.modes.split(",")
    program = next(p for p in mbpp_programs() if p.key == TASK)
    box = DockerSandbox(n_workers=1)
    image = box.image
    box.close()
    print(f"MBPP {TASK} beside {args.busy} busy containers, {os.cpu_count()} cores, "
          f"load average before {os.getloadavg()[0]:.2f}", flush=True)
    seen: dict = {m: [] for m in modes}
    with busy_containers(args.busy, image):
        for rep in range(args.reps):
            order = modes if rep % 2 == 0 else modes[::-1]
            for mode in order:
                status, detail, cpu_s, wall_s, queued, host_s = run_once(mode, program)
                seen[mode].append(status)
                print(f"rep {rep + 1} {mode:10s} {status:8s} cpu_s={cpu_s:.2f} host_cpu_s={host_s:.2f} "
                      f"wall_s={wall_s:.2f} queued_from={queued} {detail[:40]}", flush=True)
        print(f"load average with the busy containers {os.getloadavg()[0]:.2f}")
    for mode in modes:
        print(f"{mode}: " + ", ".join(f"{s} {seen[mode].count(s)}/{len(seen[mode])}" for s in sorted(set(seen[mode]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
