"""The `reference` backend: each benchmark's canonical solution, its oracle check."""
from __future__ import annotations

from typing import Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core.progress import Progress
from codeeval.generation.base import Backend, CallContext, GenOutput, GenRequest


class ReferenceBackend(Backend):
    name = "reference"

    def __init__(self, spec) -> None:
        self.spec = spec

    @classmethod
    def input_fingerprint(cls, spec, task: TaskSpec) -> str:
        return "reference"

    def generate(self, task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest],
                 progress: Progress = None, context: Optional[CallContext] = None) -> list[GenOutput]:
        by_id = {p.task_id: p for p in problems}
        outputs = [GenOutput("", 0, "reference", task.reference_solution(by_id[r.task_id])) for r in requests]
        if progress:
            progress(len(requests))
        return outputs
