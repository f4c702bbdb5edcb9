"""One generate() call of the HTTP backend in flight: each group of identical requests answered
once, from the journal when it holds the answer, else sent (at most the client's concurrency at
a time), and settled as its answer comes. The first request that fails for good fails the call
at once: the queued ones are cancelled, those in flight end on their own. What the client's
threads have to say (timeouts, retries, slowdowns) is said from the caller's thread, whose log is
the shard's."""
from __future__ import annotations

import queue
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from codeeval.generation.api.client import Client
from codeeval.generation.api.journal import Journal, request_key
from codeeval.generation.api.pace import Cancelled

COUNTED = {"timeout": "timeouts", "retry": "retries", "slower": "slowdowns"}


@dataclass(frozen=True)
class Job:
    """One request to send for the requests at `rows` (their indices in the call), which it answers."""
    rows: list[int]
    path: str  # "completions" or "chat/completions"
    body: dict
    label: str  # what a retry or timeout line names: the problem, and the sample when sampled


def groups(count: int, same: Callable[[int], tuple]) -> list[list[int]]:
    """The indices of `count` requests grouped by `same(i)` (requests that get one answer), in order."""
    found: dict[tuple, list[int]] = {}
    for i in range(count):
        found.setdefault(same(i), []).append(i)
    return list(found.values())


class Batch:
    """Sends a call's jobs through one client. Make it first: the client takes `note` as its
    callback, so that its threads' lines reach `say` (from `answer`, in the caller's thread)."""

    def __init__(self, base_url: str, say: Callable[[str], None]):
        self.base_url = base_url
        self.say = say
        self.lines: queue.Queue = queue.Queue()
        self.tally = Tally()

    def note(self, kind: str, line: str) -> None:
        self.lines.put((kind, line))

    def answer(self, client: Client, concurrency: int, jobs: Sequence[Job], settle: Callable[[list[int], dict], None],
               journal: Optional[Journal] = None) -> dict:
        """Settle every job's rows with its answer; returns the call's usage (Tally.usage)."""

        def send(job: Job, key: str) -> dict:
            try:
                answer = client.post(job.path, job.body, job.label).record()
            except BaseException:
                client.close()  # now, in this thread: no request starts after one failed for good
                raise
            if journal is not None:
                journal.put(key, answer)  # kept before anything else happens to it
            return answer

        pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="openai")
        futures = {}
        started = time.monotonic()
        try:
            for job in jobs:
                key = request_key(f"{self.base_url}/{job.path}", job.body)
                if journal is not None and (kept := journal.get(key)) is not None:
                    self.tally.add(kept, "from_journal")
                    settle(job.rows, kept)
                    continue
                futures[pool.submit(send, job, key)] = job.rows
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                self._say()
                for fut in done:
                    if isinstance(fut.exception(), Cancelled):
                        continue  # stopped by the failure that the failed request's own future raises
                    answer = fut.result()  # an error that outlived its retries fails the shard
                    self.tally.add(answer, "answered")
                    settle(futures[fut], answer)
        except BaseException:
            client.close()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            self._say()
            if journal is not None:
                journal.close()
        client.close()
        pool.shutdown(wait=True)
        return self.tally.usage(client, time.monotonic() - started if futures else 0.0)

    def _say(self) -> None:
        while True:
            try:
                kind, line = self.lines.get_nowait()
            except queue.Empty:
                return
            self.tally.counts[COUNTED[kind]] += 1
            self.say(f"openai {self.base_url}: {line}")


class Tally:
    """What one call cost: answers and their tokens, by where they came from."""

    def __init__(self):
        self.counts = {"answered": 0, "from_journal": 0, "timeouts": 0, "retries": 0, "slowdowns": 0}
        self.tokens = {"answered": [0, 0], "from_journal": [0, 0]}  # [prompt, completion]

    def add(self, answer: dict, source: str) -> None:
        usage = answer.get("usage") or {}
        self.counts[source] += 1
        self.tokens[source][0] += int(usage.get("prompt_tokens") or 0)
        self.tokens[source][1] += int(usage.get("completion_tokens") or 0)

    def usage(self, client: Client, wall_s: float) -> dict:
        sent_prompt, sent_completion = self.tokens["answered"]
        return {"requests_sent": client.sent, **self.counts,
                "prompt_tokens": sent_prompt + self.tokens["from_journal"][0],
                "completion_tokens": sent_completion + self.tokens["from_journal"][1],
                "sent_prompt_tokens": sent_prompt, "sent_completion_tokens": sent_completion,
                "wall_s": round(wall_s, 3), "concurrency": [client.pace.top, client.pace.lowest]}
