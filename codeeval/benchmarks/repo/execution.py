"""How a repo-level sample is executed and scored: a patch job under the repository's lock.

`shard_key` is the project, so an execution shard holds one repository's problems; `lock_keys`
names that repository, whose Prefect slot the shard's task takes (codeeval/tasks/slots.py), and
the patcher takes its host flock (codeeval/executors/repo/lock.py); `build` makes a `RepoJob` (file, body
span, new body, test ids); `run` hands the shard's jobs to codeeval/executors/repo (patch, test,
restore, journal) instead of the program sandbox, using the sandbox's kind (docker: the tests
run in the execution image with the repository mounted; local: host processes).
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from codeeval.benchmarks.metrics import PassAtK, by_problem
from codeeval.benchmarks.spec import Execution, Problem, Sample, Verdict
from codeeval.core.cache import cache_file, read_cached, write_cached
from codeeval.core.fingerprint import digest
from codeeval.core.progress import Progress
from codeeval.executors.base import Outcome
from codeeval.executors.repo.envs import RECIPE_VERSION, TEST_REQUIREMENTS, requirements
from codeeval.executors.repo.jobs import ENV_ERROR, MODES, RepoJob, RepoRun
from codeeval.executors.repo.lock import limit_name
from codeeval.executors.repo.patch import sha256
from codeeval.executors.repo.testrun import TestRunner

log = logging.getLogger(__name__)

def ground_truth(problem: Problem) -> str:
    """The ground-truth body (the `reference` backend's oracle): the file's own body lines."""
    r = problem.record
    path = Path(problem.site.source_root) / r["completion_path"]
    start, end = r["body_position"]
    return "".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[start - 1:end])


def runner_for(sandbox) -> TestRunner:
    if getattr(sandbox, "name", "docker") == "local":
        return TestRunner("local")
    from codeeval.executors.docker import runtimes
    from codeeval.executors.docker.images import python_image

    # the sandbox's runtime, resolved on this worker; else (`codeeval repo-envs`) the worker's default
    runtime = getattr(sandbox, "container_runtime", "") or runtimes.chosen()
    return TestRunner("docker", image=python_image(), container_runtime=runtime)


@dataclass(frozen=True)
class RepoExecution(Execution):
    mode: str = "deveval"  # "deveval": one pytest call for all tests, 60 s; "evocodebench": per test, 20 s
    runtime: str = "repo"
    concurrent_shards: bool = True  # repositories in parallel; one repository's shards meet at its lock

    def shard_key(self, problem: Problem) -> str:
        return problem.site.source_root + "::" + problem.repo.project

    def lock_keys(self, problems: Sequence[Problem]) -> tuple[str, ...]:
        return tuple(sorted({limit_name(p.repo.project) for p in problems}))

    def build(self, problem: Problem, completion: str, prepared: Any = None) -> RepoJob:
        r = problem.record
        return RepoJob(key="", code=completion, timeout_s=MODES[self.mode][1], guard=False,
                       source_root=problem.site.source_root, project_path=problem.repo.project,
                       file=r["completion_path"], body_position=tuple(r["body_position"]), indent=r["indent"],
                       tests=tuple(r["tests"]), mode=self.mode)

    def prepare(self, problems: Sequence[Problem], sandbox) -> Mapping[str, Any]:
        """With --exclude-failing-oracles: each problem's ground truth runs first (cached by the
        record, the file's pristine bytes and the environment) -> {task_id: oracle passed}."""
        wanted = [p for p in problems if p.repo.exclude_failing_oracles]
        if not wanted:
            return {}
        keys = {p.task_id: cache_file("repo-oracle", digest(
            self.mode, p.record, TEST_REQUIREMENTS, RECIPE_VERSION,
            sha256((Path(p.site.source_root) / p.record["completion_path"]).read_bytes()),
            requirements(Path(p.site.source_root) / p.repo.project),
            getattr(sandbox, "name", "docker"))) for p in wanted}
        found = {t: read_cached(k) for t, k in keys.items()}
        todo = [p for p in wanted if found[p.task_id] is None]
        if todo:
            jobs = [replace(self.build(p, ground_truth(p)), key=p.task_id) for p in todo]
            for outcome in self.run(jobs, sandbox):
                if outcome.status != ENV_ERROR:
                    found[outcome.key] = write_cached(keys[outcome.key], json.dumps(outcome.passed).encode())
        return {t: json.loads(v) for t, v in found.items() if v is not None}

    def run(self, programs: Sequence[RepoJob], sandbox, progress: Progress = None) -> list[Outcome]:
        run = RepoRun(runner_for(sandbox))
        outcomes = run.run(programs, progress)
        # warnings of the shard's thread reach its Prefect run log (tasks/shards.py)
        if run.restored:
            log.warning("restored from the journal of a killed run: %s", ", ".join(run.restored))
        for line in run.env_errors:  # one line naming the package and why; the tasks are env_error
            log.warning("%s (its tasks are env_error, not model failures)", line)
        return outcomes

    def judge(self, problem: Problem, outcome: Outcome, prepared: Any = None) -> Verdict:
        subsets = {} if prepared is None else {"oracle": bool(prepared)}
        return Verdict(outcome.status, outcome.passed, subsets=subsets, detail=outcome.detail)


@dataclass(frozen=True)
class RepoPassAtK(PassAtK):
    """pass@k over the covered problems whose repository environment could be built (and, with
    --exclude-failing-oracles, whose ground truth passes); the counts of covered, skipped
    (project absent) and env_error problems are reported beside it."""

    default_ks: tuple[int, ...] = (1, 10)

    @staticmethod
    def left_out(samples: Sequence[Sample]) -> tuple[list[str], list[str]]:
        """(env_error problems, problems whose ground truth failed): neither is a model's score."""
        groups = by_problem(samples)
        env_failed = sorted(t for t, g in groups.items() if g and all(s.verdict and s.verdict.status == ENV_ERROR
                                                                      for s in g))
        # --exclude-failing-oracles: the judge marked each sample with its ground truth's verdict
        oracle_failed = sorted(t for t, g in groups.items()
                               if any(s.verdict and s.verdict.subsets.get("oracle") is False for s in g))
        return env_failed, oracle_failed

    def per_problem(self, problems: Sequence[Problem], samples: Sequence[Sample],
                    ks: Sequence[int]) -> dict[str, dict[str, float]]:
        left_out = set().union(*self.left_out(samples))
        return super().per_problem(problems, [s for s in samples if s.task_id not in left_out], ks)

    def compute(self, problems: Sequence[Problem], samples: Sequence[Sample], ks: Sequence[int]) -> dict[str, Any]:
        out = super().compute(problems, samples, ks)
        env_failed, oracle_failed = self.left_out(samples)
        groups = by_problem(samples)
        skipped = problems[0].repo.skipped if problems else 0
        out["covered"] = len(problems)
        out["skipped"] = skipped
        out["scored"] = len(set(groups) - set(env_failed) - set(oracle_failed))
        out["env_error"] = len(env_failed)
        if any(s.verdict and "oracle" in s.verdict.subsets for s in samples):
            out["excluded_failing_oracles"] = oracle_failed
        by_repo = Counter(p.repo.project for p in problems)
        failing = Counter()
        for p in problems:
            g = groups.get(p.task_id, [])
            if g and not any(s.passed for s in g):
                failing[p.repo.project] += 1
        out["failing_by_repository"] = {repo: failing.get(repo, 0) for repo in sorted(by_repo)}
        return out
