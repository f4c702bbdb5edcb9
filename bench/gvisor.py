"""gVisor (runsc) against runc: the Docker sandbox's programs per second under each OCI runtime.

Two workloads, both runtimes in this one process, alternating round by round which runtime goes
first (a machine whose load changes affects both alike):
  humaneval  the HumanEval canonical solutions as a real run builds them (the `humaneval` task's
             program around its reference_solution: codeeval.pipeline.execute.build_programs),
             x --copies (default 20: 3280 programs); a round is one copy (164 programs) a runtime;
  multiple   the right body of HumanEval_53_add (tests/multiple_bodies.py) in Python, Rust,
             Java, JavaScript and C++, through their runners in the bookworm image, x
             --multiple-copies (a round: the five programs a runtime).
Each runtime's sandbox (--n-workers containers, default: the core count) is started before the
clocks, as a run's pool starts while it loads; what a container's start costs is measured apart
(--starts sandboxes of one container a runtime: start() to the server's greeting, then close()).
Every program must pass, else the bench stops.

Prints per round and per workload programs/s of each runtime, then `key=value` lines: the gVisor
platform (read from the engine's daemon.json: runsc's --platform runtime argument, ptrace when
it names none), each workload's programs/s and ratio=runsc/runc, and the start-up costs.

    .venv/bin/python bench/gvisor.py [--copies 20] [--multiple-copies 3] [--n-workers 0] [--starts 5]
        [--daemon-json /etc/docker/daemon.json] [--data-dir ../shared/data]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from multiple_bodies import ADD, BODIES  # noqa: E402

from codeeval.benchmarks import multiple  # noqa: E402
from codeeval.benchmarks.registry import get_task  # noqa: E402
from codeeval.benchmarks.spec import LoadOptions  # noqa: E402
from codeeval.executors.docker.sandbox import DockerSandbox  # noqa: E402
from codeeval.pipeline.execute import build_programs  # noqa: E402

RUNTIMES = ("runc", "runsc")
LANGS = ("py", "rs", "java", "js", "cpp")


def platform_of(daemon_json: Path) -> str:
    """runsc's platform as the engine's configuration names it (runsc's own default: ptrace)."""
    try:
        config = json.loads(daemon_json.read_text() or "{}")
    except (OSError, ValueError) as exc:
        sys.exit(f"bench: cannot read {daemon_json}: {exc}")
    entry = config.get("runtimes", {}).get("runsc")
    if entry is None:
        sys.exit(f"bench: {daemon_json} registers no runsc runtime: make engine RUNTIME=runsc")
    args = entry.get("runtimeArgs", [])
    named = [a.split("=", 1)[1] for a in args if a.startswith("--platform=")]
    return named[-1] if named else "ptrace"


def humaneval_rounds(data_dir: Path, copies: int) -> list:
    task = get_task("humaneval")
    problems = task.load(LoadOptions(data_dir))
    solutions = {p.task_id: task.reference_solution(p) for p in problems}
    return [build_programs(task, problems, [{"task_id": t, "sample": i, "completion": c} for t, c in solutions.items()],
                           {}) for i in range(copies)]


def multiple_rounds(data_dir: Path, copies: int) -> tuple[list, dict]:
    """The five programs a round, and {key: (execution, problem)} to judge them."""
    jobs, judges = [], {}
    for lang in LANGS:
        problem = next(p for p in get_task(f"multiple-{lang}").load(LoadOptions(data_dir)) if p.task_id == ADD)
        execution = multiple.MultiplETests(lang)
        jobs.append((lang, execution, problem, execution.build(problem, problem.prompt + BODIES[lang][ADD][0])))
    rounds = []
    for i in range(copies):
        rounds.append([dataclasses.replace(program, key=f"{lang}#{i}") for lang, _, _, program in jobs])
        judges.update({f"{lang}#{i}": (execution, problem) for lang, execution, problem, _ in jobs})
    return rounds, judges


def timed_run(box, programs, judge) -> float:
    started = time.monotonic()
    outcomes = box.run(programs)
    seconds = time.monotonic() - started
    failed = [(o.key, o.status, o.detail[:200]) for o in outcomes if not judge(o)]
    if failed:
        sys.exit(f"bench: {box.describe()['runtime']}: {len(failed)} programs did not pass: {failed[:5]}")
    return seconds


def alternate(name: str, boxes: dict, rounds: list, judge) -> dict[str, float]:
    """programs/s of each runtime over every round, the first runtime alternating."""
    seconds = {rt: 0.0 for rt in RUNTIMES}
    count = sum(len(r) for r in rounds)
    for i, programs in enumerate(rounds):
        order = RUNTIMES if i % 2 == 0 else RUNTIMES[::-1]
        took = {rt: timed_run(boxes[rt], programs, judge) for rt in order}
        for rt in RUNTIMES:
            seconds[rt] += took[rt]
        print(f"{name} round {i + 1}/{len(rounds)} ({order[0]} first): "
              + "  ".join(f"{rt} {len(programs) / took[rt]:.1f} programs/s" for rt in RUNTIMES), flush=True)
    rates = {rt: count / seconds[rt] for rt in RUNTIMES}
    print(f"{name}: {count} programs a runtime: "
          + "  ".join(f"{rt} {rates[rt]:.2f} programs/s ({seconds[rt]:.1f} s)" for rt in RUNTIMES)
          + f"  runsc/runc {rates['runsc'] / rates['runc']:.3f}", flush=True)
    return rates


def start_costs(starts: int, runtime: str = "python") -> dict[str, tuple[float, float]]:
    """Median (start, close) seconds of a one-container sandbox per runtime, alternating."""
    costs = {rt: ([], []) for rt in RUNTIMES}
    for i in range(starts):
        for rt in (RUNTIMES if i % 2 == 0 else RUNTIMES[::-1]):
            box = DockerSandbox(n_workers=1, container_runtime=rt, runtime=runtime)
            started = time.monotonic()
            box.start()
            up = time.monotonic()
            box.close()
            costs[rt][0].append(up - started)
            costs[rt][1].append(time.monotonic() - up)
    return {rt: (statistics.median(s), statistics.median(c)) for rt, (s, c) in costs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=20, help="HumanEval copies (164 programs each; 0: none)")
    parser.add_argument("--multiple-copies", type=int, default=3, help="rounds of the 5 MultiPL-E programs (0: none)")
    parser.add_argument("--n-workers", type=int, default=0, help="containers a sandbox (0: the core count)")
    parser.add_argument("--starts", type=int, default=5, help="one-container sandboxes started a runtime")
    parser.add_argument("--daemon-json", type=Path, default=Path("/etc/docker/daemon.json"))
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    platform = platform_of(args.daemon_json)
    workers = args.n_workers or os.cpu_count() or 1
    print(f"runsc platform {platform} ({args.daemon_json}); {workers} containers a sandbox; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)

    starts = start_costs(max(1, args.starts))
    for rt, (up, down) in starts.items():
        print(f"{rt}: one container's start {up:.3f} s, close {down:.3f} s (median of {args.starts})", flush=True)

    rates = {}
    if args.copies:
        with DockerSandbox(n_workers=workers, container_runtime="runc") as runc, \
                DockerSandbox(n_workers=workers, container_runtime="runsc") as runsc:
            boxes = {"runc": runc, "runsc": runsc}
            for box in boxes.values():
                box.start()
            rates["humaneval"] = alternate("humaneval", boxes, humaneval_rounds(args.data_dir, args.copies),
                                           lambda o: o.passed)
    if args.multiple_copies:
        rounds, judges = multiple_rounds(args.data_dir, args.multiple_copies)
        with DockerSandbox(n_workers=workers, runtime="multiple-cpp", container_runtime="runc") as runc, \
                DockerSandbox(n_workers=workers, runtime="multiple-cpp", container_runtime="runsc") as runsc:
            boxes = {"runc": runc, "runsc": runsc}
            for box in boxes.values():
                box.start()
            rates["multiple"] = alternate("multiple", boxes, rounds,
                                          lambda o: judges[o.key][0].judge(judges[o.key][1], o).passed)

    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"platform={platform}")
    for name, rate in rates.items():
        print(f"{name}_runc_programs_per_s={rate['runc']:.2f} {name}_runsc_programs_per_s={rate['runsc']:.2f} "
              f"{name}_ratio={rate['runsc'] / rate['runc']:.3f}")
    print(f"start_runc_s={starts['runc'][0]:.3f} start_runsc_s={starts['runsc'][0]:.3f} "
          f"start_ratio={starts['runsc'][0] / starts['runc'][0]:.2f} close_runc_s={starts['runc'][1]:.3f} "
          f"close_runsc_s={starts['runsc'][1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
