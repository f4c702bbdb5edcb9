"""`codeeval repo-envs`: every project of a repo-level data set, its environment built (or why
not) and its oracle run, one line per project as it finishes. What a user checks before trusting
DevEval / EvoCodeBench numbers on projects we do not ship: a project whose oracle does not pass
has an environment problem, not a model problem."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

HEADER = f"{'project':<44} {'environment':<60} {'oracle':>9} {'time':>8}"


@dataclass(frozen=True)
class ProjectReport:
    project: str
    env: str  # "built" or the one-line reason it was not
    passed: Optional[int]  # None: the environment was not built, nothing ran
    tasks: int
    seconds: float

    def line(self) -> str:
        oracle = f"{self.passed}/{self.tasks}" if self.passed is not None else f"-/{self.tasks}"
        return f"{self.project:<44} {self.env:<60} {oracle:>9} {self.seconds:>7.1f}s"


def report(task: str, data_dir: Optional[Path], source_code_root: Optional[Path], executor: str = "docker",
           emit: Callable[[str], None] = print) -> list[ProjectReport]:
    """Build each project's environment and run its ground truths (the host lock only: no Prefect)."""
    from codeeval.benchmarks.repo.execution import RepoExecution, ground_truth, runner_for
    from codeeval.benchmarks.repo.family import make
    from codeeval.benchmarks.spec import LoadOptions
    from codeeval.executors.repo.envs import EnvError, ensure_env
    from codeeval.executors.repo.jobs import ENV_ERROR, RepoRun

    spec = make(task)
    problems = spec.load(LoadOptions(data_dir, source_code_root=source_code_root))
    execution: RepoExecution = spec.execution
    runner = runner_for(type("Sandbox", (), {"name": executor})())
    by_project: dict[tuple[str, str], list] = {}
    for p in problems:
        by_project.setdefault((p.site.source_root, p.repo.project), []).append(p)
    emit(HEADER)
    rows = []
    for (root, project), group in by_project.items():
        started = time.monotonic()
        try:
            ensure_env(Path(root) / project, runner)
            env = "built"
        except EnvError as exc:
            env = str(exc).split(": ", 1)[-1]  # the project is the row's first column
        passed = None
        if env == "built":
            jobs = [replace(execution.build(p, ground_truth(p)), key=p.task_id) for p in group]
            outcomes = RepoRun(runner).run(jobs)
            if any(o.status == ENV_ERROR for o in outcomes):
                env = next(o.detail for o in outcomes if o.status == ENV_ERROR).split(": ", 1)[-1]
            else:
                passed = sum(bool(o.passed) for o in outcomes)
        row = ProjectReport(project, env, passed, len(group), time.monotonic() - started)
        emit(row.line())
        rows.append(row)
    built = [r for r in rows if r.passed is not None]
    emit(f"{len(built)}/{len(rows)} environments built; oracle {sum(r.passed for r in built)}/"
         f"{sum(r.tasks for r in built)} tasks of those projects pass")
    return rows
