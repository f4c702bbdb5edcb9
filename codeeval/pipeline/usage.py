"""What a task's generation cost through an API, from the usage each generation shard was written with
(artifacts.read_usage; the openai backend fills it): results.json's `codeeval.tasks.<task>.api`, the
CLI's cost line, the leaderboard's tokens.

Two kinds of figure, so that a re-run reads right: what this run did (requests sent, answers taken from
the request journal, timeouts, retries, seconds, the server's throughput), to which a shard reused whole
adds nothing but its answers under `reused`; and what the task's generations rest on (prompt and
completion tokens of every answer, whenever it was paid), which a re-run does not change.
"""
from __future__ import annotations

from pathlib import Path
from typing import Collection, Optional, Sequence

from codeeval.core import artifacts
from codeeval.generation.prompts.thinking import UNFINISHED

THIS_RUN = ("requests_sent", "answered", "from_journal", "timeouts", "retries", "slowdowns",
            "sent_prompt_tokens", "sent_completion_tokens", "wall_s")


def task_usage(paths: Sequence[Path], reused: Collection[int]) -> Optional[dict]:
    """Summed over a task's generation shards (`reused`: the indices of those reused whole); None when
    no shard has a usage (a backend that loads weights, replay, reference)."""
    shards = [(i, u) for i, path in enumerate(paths) if (u := artifacts.read_usage(path)) is not None]
    if not shards:
        return None
    total = {k: 0 for k in THIS_RUN} | {"reused": 0, "prompt_tokens": 0, "completion_tokens": 0}
    lowest = None
    for i, usage in shards:
        total["prompt_tokens"] += usage.get("prompt_tokens", 0)
        total["completion_tokens"] += usage.get("completion_tokens", 0)
        if i in reused:
            total["reused"] += usage.get("answered", 0) + usage.get("from_journal", 0)
            continue
        for k in THIS_RUN:
            total[k] += usage.get(k, 0)
        top, low = usage.get("concurrency") or (None, None)
        if low is not None:
            lowest = [top, low if lowest is None else min(low, lowest[1])]
    total["wall_s"] = round(total["wall_s"], 3)
    total["completion_tokens_per_s"] = round(total["sent_completion_tokens"] / total["wall_s"], 2) \
        if total["wall_s"] > 0 else None
    total["concurrency"] = lowest
    return total


def usage_line(api: dict) -> str:
    """The CLI table's cost line of a task."""
    reused = f", {api['reused']} in reused shards" if api.get("reused") else ""
    rate = f" at {api['completion_tokens_per_s']:.1f} completion tokens/s" if api.get("completion_tokens_per_s") else ""
    return (f"api: {api['requests_sent']} requests sent, {api['from_journal']} answered from the journal{reused}; "
            f"{api['timeouts']} timeouts, {api['retries']} retries; tokens {api['prompt_tokens']:,} prompt + "
            f"{api['completion_tokens']:,} completion; {api['wall_s']:.1f} s{rate}")


TIMES = ("compile_s", "decode_s")
COUNTS = ("store_hits", "store_misses")


def task_compute(paths: Sequence[Path], reused: Collection[int]) -> Optional[dict]:
    """What decoding a task on local weights took, shard by shard (artifacts.COMPUTE_FIELD: seconds
    compiling and capturing steps, seconds decoding, whether the compile store had the steps) and
    summed over the shards this run generated; None when no shard says (an API backend, replay)."""
    shards = []
    for i, path in enumerate(paths):
        if (compute := artifacts.read_metadata(path, artifacts.COMPUTE_FIELD)) is not None:
            shards.append({"shard": i, **compute, "reused": i in reused})
    if not shards:
        return None
    return {**compute_total(s for s in shards if not s["reused"]), "shards": shards}


def compute_total(parts) -> dict:
    """Times and store counts summed over shards, or over tasks' totals (a nightly's model)."""
    total = dict.fromkeys(TIMES, 0.0) | dict.fromkeys(COUNTS, 0)
    for part in parts:
        for k in TIMES + COUNTS:
            total[k] += part.get(k) or 0
    return {k: round(v, 3) if k in TIMES else v for k, v in total.items()}


def compute_line(compute: dict) -> str:
    """The CLI table's line of a task's (or a model's) decode time."""
    return (f"decoding: {compute['compile_s']:.1f} s compiling and capturing steps (compile store: "
            f"{compute['store_hits']} found, {compute['store_misses']} missed), {compute['decode_s']:.1f} s decoding")


THOUGHT_COLUMNS = ("finish_reason", "n_tokens", "thinking", "thinking_tokens")


def task_thinking(paths: Sequence[Path]) -> Optional[dict]:
    """A reasoning model's thinking over a task's generation shards (reused ones too: what the
    generations rest on): answers that thought, those whose thinking never closed, and the tokens
    of thinking and of answers (where the server or the tokenizer told them); None when no answer
    thought (a model that does not think, or --reasoning keep)."""
    total = {"answers": 0, "thought": 0, "unfinished": 0, "thinking_tokens": 0, "answer_tokens": 0}
    for path in paths:
        if not path.exists():
            continue
        for row in artifacts.read_rows(path, THOUGHT_COLUMNS):
            total["answers"] += 1
            if row.get("thinking") is None:
                continue
            total["thought"] += 1
            total["unfinished"] += row.get("finish_reason") == UNFINISHED
            counted = row.get("thinking_tokens")
            if counted is not None:
                total["thinking_tokens"] += counted
                total["answer_tokens"] += max((row.get("n_tokens") or 0) - counted, 0)
    return total if total["thought"] else None


def thinking_line(thought: dict) -> str:
    """The CLI table's line of a task's thinking."""
    return (f"thinking: {thought['thought']} of {thought['answers']} answers thought "
            f"({thought['thinking_tokens']:,} thinking tokens, {thought['answer_tokens']:,} answer tokens); "
            f"{thought['unfinished']} never finished thinking (failed, status {UNFINISHED})")
