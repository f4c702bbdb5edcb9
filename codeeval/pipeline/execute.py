"""The execute stage as plain library code: generation rows in, execution rows out.

Each row is a sample's Verdict (the task's Execution judged the sandbox's Outcome) next to
the raw outcome (exit code, times, output tails), so the Parquet keeps per-test detail and
the score stage needs nothing but these rows.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec, Verdict
from codeeval.core.progress import Progress
from codeeval.executors.base import Program, Sandbox
from codeeval.generation.prompts.thinking import UNFINISHED


def build_programs(task: TaskSpec, problems: Sequence[Problem], generations: Sequence[dict],
                   prepared: dict) -> list[Program]:
    by_id = {p.task_id: p for p in problems}
    return [
        dataclasses.replace(task.execution.build(by_id[g["task_id"]], g["completion"], prepared.get(g["task_id"])),
                            key=f"{g['task_id']}#{g['sample']}")
        for g in generations
    ]


def execute_rows(task: TaskSpec, problems: Sequence[Problem], generations: Sequence[dict],
                 sandbox: Sandbox, progress: Progress = None) -> list[dict]:
    by_id = {p.task_id: p for p in problems}
    shard = [by_id[t] for t in dict.fromkeys(g["task_id"] for g in generations)]
    prepared = dict(task.execution.prepare(shard, sandbox))
    outcomes = task.execution.run(build_programs(task, problems, generations, prepared), sandbox, progress)
    rows = []
    for g, outcome in zip(generations, outcomes):
        verdict = task.execution.judge(by_id[g["task_id"]], outcome, prepared.get(g["task_id"]))
        if g.get("finish_reason") == UNFINISHED:
            verdict = unfinished(verdict)
        rows.append({
            "task_id": g["task_id"], "sample": g["sample"], "status": verdict.status, "passed": verdict.passed,
            "exit_code": task.execution.exit_code(outcome), "duration_s": outcome.duration_s, "cpu_s": outcome.cpu_s,
            "stdout_tail": outcome.stdout_tail, "stderr_tail": outcome.stderr_tail, "detail": verdict.detail,
            "tests": list(verdict.tests), "subsets": sorted(verdict.subsets.items()), "answer": verdict.answer,
            "score": verdict.score,
        })
    return rows


def unfinished(verdict: Verdict) -> Verdict:
    """A sample whose thinking never closed has no answer: its empty completion ran as any other
    (a family's judge gives its detail), and it fails whatever that gave, under a status of its own
    (results.json's statuses count it; docs/generation.md)."""
    return dataclasses.replace(verdict, status=UNFINISHED, passed=False if verdict.passed is not None else None,
                               subsets={name: False for name in verdict.subsets},
                               detail="the answer's thinking never closed: no answer to run")


def verdict_of(row: dict) -> Verdict:
    """The Verdict an execution row holds (the inverse of execute_rows' judged columns)."""
    return Verdict(row["status"], row["passed"], tuple(row.get("tests") or ()), dict(row.get("subsets") or ()),
                   row.get("answer"), row.get("score"), row.get("detail") or "")
