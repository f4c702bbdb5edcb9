"""The execute stage as plain library code: generation rows in, execution rows out."""
from __future__ import annotations

from typing import Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.executors.base import Program, Progress, Sandbox


def build_programs(task: TaskSpec, problems: Sequence[Problem], generations: Sequence[dict]) -> list[Program]:
    by_id = {p.task_id: p for p in problems}
    return [
        Program(key=f"{g['task_id']}#{g['sample']}", code=task.program(by_id[g["task_id"]], g["completion"]),
                timeout_s=task.timeout_s, guard=task.guard)
        for g in generations
    ]


def execute_rows(task: TaskSpec, problems: Sequence[Problem], generations: Sequence[dict],
                 sandbox: Sandbox, progress: Progress = None) -> list[dict]:
    outcomes = sandbox.run(build_programs(task, problems, generations), progress)
    return [
        {"task_id": g["task_id"], "sample": g["sample"], "status": o.status, "passed": o.passed,
         "exit_code": o.exit_code, "duration_s": o.duration_s, "cpu_s": o.cpu_s, "stdout_tail": o.stdout_tail,
         "stderr_tail": o.stderr_tail, "detail": o.detail}
        for g, o in zip(generations, outcomes)
    ]
