"""Verdicts on programs that sleep, and on the oracles, idle and with every core busy (issue 37).

For HumanEval, MBPP (bigcode's 3 s) and the APPS fixtures (apps_metric's 4 s per test and 11 s per
sample) it runs, in the Docker sandbox:
  * the oracle: every problem's reference solution (HumanEval 164, MBPP 500, APPS fixtures 9);
  * sleepers: the reference solution made to sleep just under and just over the reference's
    limit (HumanEval, MBPP: the first --sleepers problems, a sleep of 2.5 s and of 3.5 s after
    the solution; APPS: every fixture problem, 3.3 s and 4.5 s in each test, and 3.8 s in each
    test of the three-test problems, whose 11.4 s pass the sample's 11 s);
once on an idle machine and once while one spinning process per core (at least two) keeps every
core busy. It prints, per set, the verdicts it got and those the reference harness gives (the
reference's verdict on a sleeper is decided by the sleep alone on an idle machine).

    PYTHONPATH=. .venv/bin/python bench/sleep_verdicts.py [--sleepers 16] [--only idle|busy]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager, nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
APPS_FIXTURES = ROOT / "tests" / "fixtures"


@contextmanager
def busy_cores():
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(2, os.cpu_count() or 1))]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def sleeping(solution: str, seconds: float) -> str:
    """A whole program's solution that sleeps once, after its code (HumanEval, MBPP)."""
    return f"{solution}\nimport time as _time\n_time.sleep({seconds})\n"


def apps_sleeping(record: dict, solution: str, seconds: float) -> str:
    """An APPS solution that sleeps in each test: in the body apps_metric wraps into code() for
    standard input, in a wrapper of the function for call-based problems."""
    fn = json.loads(record["input_output"]).get("fn_name")
    if fn is None:
        return f"import time\ntime.sleep({seconds})\n{solution}"
    if "class Solution" in solution:
        return (f"{solution}\nimport time as _time\n_orig = Solution.{fn}\ndef _slow(self, *a, **k):\n"
                f"    _time.sleep({seconds})\n    return _orig(self, *a, **k)\nSolution.{fn} = _slow\n")
    return (f"{solution}\nimport time as _time\n_orig = {fn}\ndef {fn}(*a, **k):\n    _time.sleep({seconds})\n"
            f"    return _orig(*a, **k)\n")


def sets(n_sleepers: int):
    """(name, task, problems, rows, the reference's pass count) per set."""
    from codeeval.benchmarks import apps
    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions

    out = []
    for name in ("humaneval", "mbpp"):
        task = get_task(name)
        problems = task.load(LoadOptions(DATA))
        oracle = [{"task_id": p.task_id, "sample": 0, "completion": task.reference_solution(p)} for p in problems]
        out.append((f"{name} oracle", task, problems, oracle, len(problems) - (name == "mbpp")))
        for seconds, expected in ((2.5, n_sleepers), (3.5, 0)):
            rows = [{"task_id": p.task_id, "sample": 0, "completion": sleeping(task.reference_solution(p), seconds)}
                    for p in problems[:n_sleepers]]
            out.append((f"{name} sleep {seconds}s", task, problems, rows, expected))
    task = get_task("apps-introductory")
    problems = [p for level in apps.LEVELS for p in get_task(f"apps-{level}").load(LoadOptions(APPS_FIXTURES))]
    oracle = [{"task_id": p.task_id, "sample": 0, "completion": task.reference_solution(p)} for p in problems]
    out.append(("apps oracle", task, problems, oracle, len(problems)))
    for seconds, chosen, expected in ((3.3, problems, len(problems)), (4.5, problems, 0),
                                      (3.8, [p for p in problems if apps.n_tests(p) == 3], 0)):
        rows = [{"task_id": p.task_id, "sample": 0,
                 "completion": apps_sleeping(p.record, task.reference_solution(p), seconds)} for p in chosen]
        out.append((f"apps sleep {seconds}s per test" + (" (3 tests)" if seconds == 3.8 else ""), task, problems,
                    rows, expected))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sleepers", type=int, default=16, help="HumanEval/MBPP problems per sleeper set")
    parser.add_argument("--only", choices=("idle", "busy"), help="one condition only")
    args = parser.parse_args()
    from codeeval.executors.docker.sandbox import DockerSandbox
    from codeeval.pipeline.execute import execute_rows

    print(f"codeeval from {Path(sys.modules['codeeval'].__file__).parent if 'codeeval' in sys.modules else '?'}")
    for condition in ("idle", "busy"):
        if args.only and condition != args.only:
            continue
        with (busy_cores() if condition == "busy" else nullcontext()):
            with DockerSandbox() as sandbox:
                sandbox.start()
                for name, task, problems, rows, expected in sets(args.sleepers):
                    started = time.monotonic()
                    executed = execute_rows(task, problems, rows, sandbox)
                    passed = sum(bool(r["passed"]) for r in executed)
                    statuses = Counter(r["status"] for r in executed)
                    tests = Counter(tuple(r["tests"]) for r in executed) if name.startswith("apps") else ""
                    print(f"{condition:4} | {name:32} | passed {passed}/{len(rows)} (reference {expected}) | "
                          f"{dict(statuses)} {dict(tests) if tests else ''} | {time.monotonic() - started:.1f}s",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
