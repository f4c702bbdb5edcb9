"""Repo-level execution throughput: DevEval's three real projects in ../shared, patch -> test ->
restore in the execution image, against the references' ~3 s per completion (sequential).

Jobs: the ground truth and both released greedy files (63 completions over 21 tasks; identical
completions of one namespace run once, as upstream's log does). Each repository runs under its
lock (host flock; no Prefect here); `--workers` lists how many repositories run at once.
Prints completions/s and s/completion per worker count, and the verdict counts (which must not
change with the worker count).

    .venv/bin/python bench/repo_level.py [--workers 1,2,3]
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RELEASED = ["gpt-4-1106-preview", "deepseek-7b"]


def jobs():
    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.repo.execution import ground_truth
    from codeeval.benchmarks.spec import LoadOptions

    task = get_task("deveval")
    problems = task.load(LoadOptions(DATA))
    completions = {"reference": {p.task_id: ground_truth(p) for p in problems}}
    for model in RELEASED:
        path = DATA / f"deveval/released/without_context/{model}_greedy/completion.jsonl.gz"
        with gzip.open(path, "rt") as fh:
            completions[model] = {r["namespace"]: r["completion"] for r in map(json.loads, fh)}
    return [dataclasses.replace(task.execution.build(p, completions[m][p.task_id]), key=f"{m}:{p.task_id}")
            for m in completions for p in problems]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2,3")
    args = parser.parse_args()
    from codeeval.executors.docker.images import python_image
    from codeeval.executors.repo.envs import ensure_env
    from codeeval.executors.repo.jobs import RepoRun
    from codeeval.executors.repo.testrun import TestRunner

    all_jobs = jobs()
    by_repo: dict[str, list] = {}
    for job in all_jobs:
        by_repo.setdefault(job.project_path, []).append(job)
    runner = TestRunner("docker", image=python_image())
    for group in by_repo.values():  # environments built before timing
        ensure_env(Path(group[0].source_root) / group[0].project_path, runner)
    for workers in [int(w) for w in args.workers.split(",")]:
        started = time.monotonic()
        with ThreadPoolExecutor(workers) as pool:
            outcomes = [o for out in pool.map(lambda g: RepoRun(runner).run(g), by_repo.values())
                        for o in out]
        wall = time.monotonic() - started
        counts = Counter((o.key.split(":")[0], o.status) for o in outcomes)
        print(f"workers={workers} repositories={len(by_repo)} completions={len(outcomes)} wall={wall:.1f}s "
              f"{len(outcomes) / wall:.2f} completions/s {wall / len(outcomes):.2f} s/completion "
              f"(reference ~3 s/completion)  {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
