"""Fixed cost of one command: a one-problem `reference` run of HumanEval, phase by phase.

Runs `codeeval run --model reference --tasks humaneval --limit 1 --allow_code_execution`
(fresh output dir each time, so the shard really generates and executes; Docker sandbox by
default) --repeat times with CODEEVAL_PHASES=1, and prints for each run, then the median:

    startup   interpreter start and `import codeeval.cli`    (process start -> main())
    imports   what the run needs before the checks
    checks    flags, output dir, model, Docker engine
    data      loading the task's problems
    prefect   `import prefect` and the flow module
    server    the warm-up imports, then waiting for the temporary Prefect API server (it boots
              from the first moment, in parallel; no wait with a configured PREFECT_API_URL)
    flow      the flow: load, generate, execute, score, publish task runs
    exit      from the flow's end to the process's exit (Prefect's queues drained, the server
              told to stop)

Baseline, in the same process: a bare Prefect command (`import prefect`, a flow with one
task run, on Prefect's own temporary server) — the floor of any harness built on Prefect.
The target is 3 s (issue 25; issue 14's was bigcode-evaluation-harness's 7 s).

Each run is made on both of the private server's paths, interleaved (codeeval/prefect_compat.py):
gated (the Prefect patches tested on this Prefect applied) and plain (CODEEVAL_PREFECT_PATCHES=off,
what a Prefect the patches were not tested on gets). Last line:
`fixed_cost_s=<gated median> target_s=3.0 ratio_to_bare_prefect=<gated / bare> plain_fixed_cost_s=<plain
median> plain_extra_s=<plain - gated>`.

    .venv/bin/python bench/overhead.py [--repeat 3] [--executor docker] [--data-dir ../shared/data]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = {"gated": {}, "plain": {"CODEEVAL_PREFECT_PATCHES": "off"}}  # the environment of each path
PHASES = ["startup", "imports", "checks", "data", "prefect", "server", "flow", "exit"]
MARKS = ["start", "imports", "checks", "data", "prefect import", "prefect start", "flow"]
BARE = """
from prefect import flow, task

@task
def one():
    return 1

@flow
def bare():
    return one()

bare()
"""


def timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    started = time.time()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    ended = time.time()
    if done.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd[:4])} ... failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return started, ended, done.stderr


def ours(args, out: Path, env: dict) -> dict[str, float]:
    cmd = [sys.executable, "-m", "codeeval", "run", "--model", "reference", "--tasks", "humaneval", "--limit", "1",
           "--allow_code_execution", "--executor", args.executor, "--output-dir", str(out)]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    started, ended, err = timed(cmd, {**env, "CODEEVAL_PHASES": "1"})
    line = next((ln for ln in err.splitlines() if ln.startswith("codeeval: phases ")), None)
    if line is None:  # a version without phase marks: the total only
        return {"flow": ended - started, **{p: 0.0 for p in PHASES if p != "flow"}}
    marks = dict(json.loads(line[len("codeeval: phases "):]))
    times = [started] + [marks[m] for m in MARKS] + [ended]
    return {phase: b - a for phase, a, b in zip(PHASES, times, times[1:])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--executor", default="docker", choices=["docker", "local"])
    default_data = ROOT.parent / "shared" / "data"
    parser.add_argument("--data-dir", default=str(default_data) if default_data.is_dir() else "")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("CODEEVAL_PHASES", "CODEEVAL_PREFECT_PATCHES")}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")

    # one warm-up of each, so that both find the Prefect database migrated and files cached
    with tempfile.TemporaryDirectory(prefix="codeeval-bench-") as tmp:
        for path, extra in PATHS.items():
            ours(args, Path(tmp) / f"warm-{path}", {**env, **extra})
        timed([sys.executable, "-c", BARE], {**env, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"})
        runs, bare = {path: [] for path in PATHS}, []
        for i in range(args.repeat):
            for path, extra in PATHS.items():
                runs[path].append(ours(args, Path(tmp) / f"run{i}-{path}", {**env, **extra}))
                total = sum(runs[path][-1].values())
                print(f"run {i + 1} {path}: " + "  ".join(f"{p} {runs[path][-1][p]:.2f}" for p in PHASES)
                      + f"  | total {total:.2f} s", flush=True)
            started, ended, _ = timed([sys.executable, "-c", BARE],
                                      {**env, "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"})
            bare.append(ended - started)
            print(f"run {i + 1}: bare prefect {bare[-1]:.2f} s", flush=True)
    fixed = {}
    for path in PATHS:
        median = {p: statistics.median(r[p] for r in runs[path]) for p in PHASES}
        fixed[path] = statistics.median(sum(r.values()) for r in runs[path])
        print(f"median {path}: " + "  ".join(f"{p} {median[p]:.2f}" for p in PHASES) + f"  | total {fixed[path]:.2f}")
    ratio = fixed["gated"] / statistics.median(bare)
    print(f"fixed_cost_s={fixed['gated']:.2f} target_s=3.0 ratio_to_bare_prefect={ratio:.2f}"
          f" plain_fixed_cost_s={fixed['plain']:.2f} plain_extra_s={fixed['plain'] - fixed['gated']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
