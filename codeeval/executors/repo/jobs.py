"""Patch -> test -> restore for a batch of repository jobs, one repository at a time under its lock.

Library code without Prefect: the host flock is taken here; the Prefect slot that serializes a
repository across hosts is the orchestration's (codeeval/tasks/slots.py). Identical jobs (same
file, span, completion and tests) run once; their outcome is shared.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

from codeeval.core.progress import Progress
from codeeval.executors.base import FAILED, PASSED, SANDBOX_ERROR, TIMEOUT, Outcome, Program
from codeeval.executors.repo import tree
from codeeval.executors.repo.envs import EnvError, ensure_env
from codeeval.executors.repo.lock import host_lock
from codeeval.executors.repo.patch import Journal, patched_text, sha256
from codeeval.executors.repo.testrun import TestRunner

log = logging.getLogger(__name__)

ENV_ERROR = "env_error"  # the repository's environment could not be built: never a model failure
EMPTY = "    pass\n"  # the references' "nothing found" completion: failed without running

# How each benchmark runs a sample's tests: (one invocation per test id?, seconds per invocation)
MODES = {"evocodebench": (True, 20.0), "deveval": (False, 60.0)}


@dataclass(frozen=True)
class RepoJob(Program):
    """A patch instead of a program: `code` is the completion (the new body)."""

    source_root: str = ""  # the Source_Code root (holds <project_path>)
    project_path: str = ""  # e.g. "Communications/twtxt"
    file: str = ""  # the file to patch, relative to source_root (completion_path)
    body_position: tuple[int, int] = (0, 0)  # 1-based, inclusive
    indent: int = 0
    tests: tuple[str, ...] = ()  # pytest node ids relative to the project
    mode: str = "deveval"

    @property
    def identity(self) -> tuple:
        return (self.source_root, self.file, self.body_position, self.indent, self.code, self.tests, self.mode)


def recover_project(root: Path, project: str) -> list[str]:
    """Restore what a killed run left patched in `project` (under its host lock): the loader calls
    this before reading signatures and ground-truth bodies from the files."""
    journal = Journal(root, project)
    if not journal.pending():
        return []

    with host_lock(journal.project_dir):
        return journal.recover()


@dataclass
class RepoRun:
    """Running a batch: the test runner, what to report."""

    runner: TestRunner
    on_patched: Optional[Callable[[RepoJob], None]] = None  # test hook: called while a file is patched
    restored: list[str] = field(default_factory=list)  # files recovered from a killed run's journal
    env_errors: list[str] = field(default_factory=list)  # one line per repository whose environment failed

    def run(self, jobs: Sequence[RepoJob], progress: Progress = None) -> list[Outcome]:
        outcomes: dict[str, Outcome] = {}
        groups: dict[tuple[str, str], list[RepoJob]] = {}
        for job in jobs:
            groups.setdefault((job.source_root, job.project_path), []).append(job)
        for (root, project), group in groups.items():
            outcomes.update(self._run_repository(Path(root), project, group, progress))
        return [outcomes[job.key] for job in jobs]

    def _run_repository(self, root: Path, project: str, jobs: list[RepoJob], progress: Progress) -> dict:
        journal = Journal(root, project)
        with host_lock(journal.project_dir):
            for rel in journal.recover():
                log.warning("%s: restored %s, left patched by a killed run", project, rel)
                self.restored.append(rel)
            try:
                env = ensure_env(root / project, self.runner)
            except EnvError as e:
                self.env_errors.append(str(e))
                if progress:
                    progress(len(jobs))
                return {j.key: Outcome(j.key, ENV_ERROR, False, None, 0.0, detail=str(e)) for j in jobs}
            pristine = {j.file: sha256((root / j.file).read_bytes()) for j in jobs}
            keep = tree.baseline(root, project)
            done: dict[tuple, Outcome] = {}
            results = {}
            for job in jobs:
                if job.identity not in done:
                    tree.sweep(root / project, keep)  # what earlier samples' tests left
                    done[job.identity] = self._run_one(journal, root, env, job, pristine[job.file])
                results[job.key] = replace(done[job.identity], key=job.key)
                if progress:
                    progress(1)
            tree.sweep(root / project, keep)
            return results

    def _run_one(self, journal: Journal, root: Path, env: Path, job: RepoJob, pristine: str) -> Outcome:
        if job.code == EMPTY:
            return Outcome(job.key, FAILED, False, None, 0.0, detail="no function body found (the references' "
                                                                      "'    pass' completion): not run")
        path = root / job.file
        new = patched_text(path.read_text(encoding="utf-8"), job.body_position, job.code, job.indent)
        per_test, timeout = MODES[job.mode][0], job.timeout_s
        started = time.monotonic()
        with journal.patched(job.file, new, pristine):
            if self.on_patched:
                self.on_patched(job)
            invocations = [[t] for t in job.tests] if per_test else [list(job.tests)]
            if not job.tests:
                raise ValueError(f"{job.key}: a repo-level task without tests")
            for args in invocations:
                run = self.runner.run(root / job.project_path, job.project_path, env, args, timeout)
                if run.exit_code != 0:
                    break
        duration = time.monotonic() - started
        if run.timed_out:
            status, detail = TIMEOUT, f"tests ran past {timeout:g}s ({' '.join(args)}); process tree killed"
        elif run.exit_code == 0:
            status, detail = PASSED, ""
        elif run.exit_code in (125, 126, 127):  # docker itself (or the interpreter) could not start
            status, detail = SANDBOX_ERROR, f"test runner failed to start (exit {run.exit_code})"
        else:
            status, detail = FAILED, f"pytest exit code {run.exit_code} ({' '.join(args)})"
        return Outcome(job.key, status, status == PASSED, run.exit_code, duration, run.output, "", detail)
