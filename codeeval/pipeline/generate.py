"""The generate stage as plain library code: problems in, generation rows out."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core.progress import Progress
from codeeval.generation.base import Backend, CallContext, GenRequest
from codeeval.generation.prompts.thinking import UNFINISHED


def generate_rows(task: TaskSpec, problems: Sequence[Problem], shard: Sequence[Problem],
                  counts: Mapping[str, int], backend: Backend, progress: Progress = None,
                  context: Optional[CallContext] = None) -> list[dict]:
    """One row per (problem, sample) of `shard`; `completion` is the post-processed program (none
    for an answer whose thinking never closed), `thinking` a reasoning model's thinking.
    `problems` is every problem of the task (replay maps file positions onto it); `context`: what the
    shard lends the backend (an API backend's journal, its lines, its usage)."""
    eos = backend.eos_text()
    extra = (eos,) if eos else ()
    stops = task.stop_words + extra
    requests = [GenRequest(p.task_id, s, p.prompt, stops) for p in shard for s in range(counts[p.task_id])]
    outputs = backend.generate(task, problems, requests, progress, context)
    if len(outputs) != len(requests):
        raise RuntimeError(f"backend {backend.name} returned {len(outputs)} outputs for {len(requests)} requests")
    by_id = {p.task_id: p for p in problems}
    rows = []
    for request, out in zip(requests, outputs):
        problem = by_id[request.task_id]
        if out.finish_reason == UNFINISHED:  # no answer: an empty completion, failed (pipeline/execute.py)
            completion = ""
        else:
            completion = out.program if out.program is not None else task.postprocess(problem, out.raw, extra)
        rows.append({"task_id": request.task_id, "sample": request.sample, "raw": out.raw,
                     "completion": completion, "n_tokens": out.n_tokens, "finish_reason": out.finish_reason,
                     "thinking": out.thinking, "thinking_tokens": out.thinking_tokens})
    return rows
