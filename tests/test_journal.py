"""The request journal (codeeval/generation/api/journal.py) and the pace of requests
(codeeval/generation/api/pace.py), without a server."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from codeeval.generation.api.journal import Journal, journal_dir, request_key
from codeeval.generation.api.pace import Pace

BODY = {"model": "m", "prompt": "def f():\n", "max_tokens": 64, "temperature": 0.0, "top_p": 1.0, "seed": 0,
        "stop": ["\ndef"]}
URL = "http://127.0.0.1:8000/v1/completions"


def test_the_key_is_the_whole_request_and_nothing_else():
    key = request_key(URL, BODY)
    assert request_key(URL, {**BODY, "stream": True, "stream_options": {"include_usage": True}}) == key
    assert request_key(URL, dict(reversed(BODY.items()))) == key
    for field, other in [("model", "m2"), ("prompt", "def g():\n"), ("max_tokens", 63), ("temperature", 0.2),
                         ("top_p", 0.95), ("seed", 1), ("stop", ["\nclass"])]:
        assert request_key(URL, {**BODY, field: other}) != key, field
    assert request_key(URL.replace("completions", "chat/completions"), BODY) != key
    assert journal_dir(Path("/s"), "http://h/v1/", "org/Model") == journal_dir(Path("/s"), "http://h/v1", "org/Model")


def test_an_answer_is_on_disk_when_put_returns_and_a_torn_line_is_skipped(tmp_path):
    """A writer killed by SIGKILL right after put() returned loses nothing; one killed mid-line leaves
    a torn last line, which the next reader skips."""
    folder = tmp_path / "requests" / "m-1"
    code = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from codeeval.generation.api.journal import Journal
        j = Journal(Path({str(folder)!r}))
        j.put("a", {{"text": "x", "finish_reason": "stop", "usage": {{"prompt_tokens": 3}}}})
        j.put("b", {{"text": "y", "finish_reason": "length", "usage": {{}}}})
        os.write(j._fd, b'{{"key": "c", "answ')  # the line a kill cut
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == -9
    journal = Journal(folder)
    assert set(journal.answers) == {"a", "b"} and journal.torn == 1
    assert journal.get("a")["usage"] == {"prompt_tokens": 3}
    journal.put("d", {"text": "z"})  # a new writer writes a file of its own, never after a torn line
    journal.close()
    assert len(list(folder.glob("*.jsonl"))) == 2 and set(Journal(folder).answers) == {"a", "b", "d"}
    assert all(p.stat().st_mode & 0o044 == 0o044 for p in folder.iterdir())  # the team reads it too


def test_an_fsspec_store_carries_the_journal_between_hosts(tmp_path, monkeypatch):
    """CODEEVAL_STORAGE as a URL: a host's answers reach another host through the store."""
    from codeeval.core import storage

    monkeypatch.setenv("CODEEVAL_STORAGE", (tmp_path / "store").as_uri())
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "host-a"))
    first = Journal(journal_dir(storage.root(), "http://h/v1", "m"))
    first.put("a", {"text": "x"})
    first.close()
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "host-b"))
    folder = journal_dir(storage.root(), "http://h/v1", "m")
    assert str(tmp_path / "host-b") in str(folder) and not folder.exists()
    assert Journal(folder).get("a") == {"text": "x"}


def test_concurrency_halves_while_a_server_queues_and_stays_while_it_batches():
    """A server that computes one request at a time: each first token waits for every answer before
    it, so the limit falls to 1 or 2 (once per round). A server that batches: first tokens stay
    quick, the limit stays."""
    def run(first_token) -> list[int]:
        pace, limits = Pace(8), []
        epochs = [pace.acquire() for _ in range(8)]
        for i in range(40):
            pace.release(epochs.pop(0), first_token(min(i, pace.limit)))
            limits.append(pace.limit)
            while pace.in_flight < pace.limit:
                epochs.append(pace.acquire())
        return limits

    queued = run(lambda ahead: 0.2 + 3.0 * ahead)  # 3 s an answer, computed one after another
    assert queued[:3] == [8, 4, 4] and min(queued) == 1 and max(queued[10:]) <= 2
    assert run(lambda ahead: 0.3) == [8] * 40
    pace = Pace(8)
    assert pace.release(pace.acquire(), busy="HTTP 429") == "HTTP 429; at most 4 requests at once (was 8)"
