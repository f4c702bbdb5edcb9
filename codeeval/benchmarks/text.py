"""String helpers shared by the benchmarks' post-processors."""
from __future__ import annotations

from typing import Iterable


def cut_at_stop(text: str, stops: Iterable[str]) -> str:
    """bigcode's `stop_at_stop_token`: cut at the earliest occurrence of any stop string."""
    end = len(text)
    for stop in stops:
        if not stop:
            continue
        at = text.find(stop)
        if at != -1 and at < end:
            end = at
    return text[:end]


def prompt_plus_cut(prompt: str, continuation: str, stops: Iterable[str]) -> str:
    """bigcode's HumanEval/MBPP post-processing: `prompt + cut(generation[len(prompt):])`.

    bigcode slices the decoded prompt back off; we receive the continuation alone, so a
    tokenizer round-trip can never shift the cut (docs/deviations.md).
    """
    return prompt + cut_at_stop(continuation, stops)
