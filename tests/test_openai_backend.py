"""The OpenAI-compatible backend against a small server on 127.0.0.1 that speaks the real
request and response shapes of /v1/completions and /v1/chat/completions."""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.generation import BackendSpec, GenerationArgs, GenRequest, open_backend
from codeeval.generation.api.openai_backend import OpenAIBackend
from codeeval.generation.base import CallContext

PROMPTS = ['def add(a, b):\n    """Add."""\n', "def sub(a, b):\n", "def mul(a, b):\n"]


class FakeServer:
    def __init__(self):
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.fail_first = {}  # prompt prefix -> number of 429/503 answers still to give
        self.reject = {}  # prompt text -> HTTP status always answered (e.g. 400)
        self.stuck = {}  # prompt text -> attempts still to leave unanswered (nothing sent until closed)
        self.malformed = set()  # prompt texts answered 200 with a body that is not an OpenAI response
        self.closed = threading.Event()  # set when the stuck attempts' connections were closed
        self.lock = threading.RLock()  # _send answers inside it, and takes it to count the answer
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.counted = False
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("Authorization") != "Bearer sk-test":
                    return self._send(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
                with server.lock:
                    server.requests.append({"path": self.path, **body})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    self.counted = True
                try:
                    time.sleep(0.05)
                    text = body.get("prompt") or body["messages"][-1]["content"]
                    with server.lock:
                        for key, code in server.reject.items():
                            if key in text:
                                return self._send(code, {"error": {"message": "bad request"}})
                        stuck = next((k for k, left in server.stuck.items() if k in text and left > 0), None)
                        if stuck:
                            server.stuck[stuck] -= 1
                        if any(k in text for k in server.malformed):
                            return self._send(200, "<html>proxy error</html>")
                    if stuck:  # say nothing until the client gives up on this connection
                        self.connection.settimeout(10)
                        if self.connection.recv(1) == b"":
                            server.closed.set()
                        return None
                    with server.lock:
                        for key, left in server.fail_first.items():
                            if key in text and left > 0:
                                server.fail_first[key] = left - 1
                                return self._send(429 if left % 2 else 503, {"error": {"message": "slow down"}},
                                                  {"Retry-After": "0"})
                    if self.path == "/v1/completions":
                        answer = server.completion(body)
                    elif self.path == "/v1/chat/completions":
                        answer = server.chat(body)
                    else:
                        return self._send(404, {"error": {"message": "not found"}})
                    return self._stream(answer) if body.get("stream") else self._send(200, answer)
                finally:
                    self._answered()

            def _answered(self):
                """Out of the count before the bytes that let the client end the request are written:
                counted after them, a busy machine saw the client's next request first (4 > 3)."""
                if self.counted:
                    self.counted = False
                    with server.lock:
                        server.in_flight -= 1

            def _stream(self, answer):
                """The answer as server-sent events: a chunk per word, the finish reason, the usage, [DONE]."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                choice = answer["choices"][0]
                chat = "message" in choice
                text = choice["message"]["content"] if chat else choice["text"]
                head = {k: v for k, v in answer.items() if k not in ("choices", "usage")}
                for word in re.findall(r"\s*\S+\s*", text) or [""]:
                    piece = {"delta": {"content": word}} if chat else {"text": word}
                    self._event({**head, "choices": [{"index": 0, **piece, "finish_reason": None}]})
                last = {k: v for k, v in choice.items() if k not in ("message", "text")}
                self._answered()
                self._event({**head, "choices": [{**last, **({"delta": {}} if chat else {"text": ""})}]})
                self._event({**head, "choices": [], "usage": answer["usage"]})
                self.wfile.write(b"data: [DONE]\n\n")

            def _event(self, obj):
                self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
                self.wfile.flush()

            def _send(self, code, obj, headers=None):
                data = json.dumps(obj).encode()
                self._answered()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def completion(self, body):
        name = body["prompt"].split("def ", 1)[1].split("(")[0]
        full = f"    return {name}_result\n\ndef helper():\n    pass\n"
        stops = body.get("stop") or []
        text, reason, stop_reason = full, "length", None
        cuts = [(full.find(s), s) for s in stops if s in full]
        if cuts:
            i, s = min(cuts)
            text, reason, stop_reason = full[:i], "stop", s
        if body.get("temperature", 1.0) > 0:
            text += f"# seed {body.get('seed')}"
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": reason,
                             "stop_reason": stop_reason}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}}

    def chat(self, body):
        content = body["messages"][-1]["content"]
        if "def add" in content:  # repeats the prompt, then completes it
            answer = ('Sure:\n```python\ndef add(a, b):\n    """Add."""\n    return a + b\n```\nDone.')
        else:  # rewrites the function without the prompt's docstring
            answer = "```python\nimport math\n\ndef sub(x, y):\n    return x - y\n```"
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                             "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32}}

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture
def problems():
    return [Problem(f"T/{i}", i, p, {}) for i, p in enumerate(PROMPTS)]


def task_for(problems):
    return TaskSpec("toy", "toy", lambda o: problems, ("\ndef", "\nclass"),
                    lambda p, raw, extra: p.prompt + raw.split("\ndef")[0], lambda p: "", ())


def spec(server, args=GenerationArgs(do_sample=False, max_new_tokens=64), **opts):
    options = {"base_url": server.url, "api_key": "sk-test", "backoff_s": "0.01", **opts}
    return BackendSpec("openai", "toy-model", args, options=tuple(sorted(options.items())))


def test_completions_endpoint(server, problems):
    task = task_for(problems)
    b = OpenAIBackend(spec(server, concurrency="2"))
    reqs = [GenRequest(p.task_id, s, p.prompt, task.stop_words) for p in problems for s in range(3)]
    seen = []
    outs = b.generate(task, problems, reqs, progress=seen.append)
    assert sum(seen) == len(reqs)
    assert [o.raw for o in outs[:3]] == ["    return add_result\n"] * 3
    assert outs[0].finish_reason == "stop" and outs[0].n_tokens == 7 and outs[0].program is None
    assert task.postprocess(problems[0], outs[0].raw, ()) == PROMPTS[0] + "    return add_result\n"
    # identical greedy requests are sent once; the request has the real shape
    assert len(server.requests) == len(problems)
    r = server.requests[0]
    assert r["path"] == "/v1/completions" and r["model"] == "toy-model"
    assert r["max_tokens"] == 64 and r["temperature"] == 0.0 and r["stop"] == ["\ndef", "\nclass"]
    assert server.max_in_flight <= 2


def test_sampling_sends_per_sample_seeds_and_respects_concurrency(server, problems):
    task = task_for(problems)
    args = GenerationArgs(do_sample=True, temperature=0.8, top_p=0.95, n_samples=4, max_new_tokens=32, seed=7)
    b = open_backend(spec(server, args, concurrency="3"))
    reqs = [GenRequest(p.task_id, s, p.prompt, task.stop_words) for p in problems for s in range(4)]
    outs = b.generate(task, problems, reqs)
    assert len(server.requests) == len(reqs)
    assert 1 < server.max_in_flight <= 3
    seeds = [o.raw.rsplit("seed ", 1)[1] for o in outs]
    assert len(set(seeds)) == len(reqs)  # every sample its own seed
    again = OpenAIBackend(spec(server, args, concurrency="1")).generate(task, problems, list(reversed(reqs)))
    assert [o.raw for o in reversed(again)] == [o.raw for o in outs]  # seeds do not depend on order


def test_retries_with_backoff_then_succeeds(server, problems):
    """A burst of 429/503: each retry is one line and counted, and concurrency halves."""
    task = task_for(problems)
    server.fail_first = {"def sub": 3}
    said, context = [], CallContext(say=lambda line: said.append(line))
    outs = OpenAIBackend(spec(server)).generate(
        task, problems, [GenRequest(p.task_id, 0, p.prompt, task.stop_words) for p in problems], context=context)
    assert outs[1].raw == "    return sub_result\n"
    assert sum(1 for r in server.requests if "def sub" in r["prompt"]) == 4
    retries = [line for line in said if "sent again" in line]
    assert len(retries) == 3 and all("T/1: HTTP 429" in line or "T/1: HTTP 503" in line for line in retries), said
    assert context.usage["retries"] == 3 and context.usage["requests_sent"] == 6 and context.usage["answered"] == 3
    assert context.usage["concurrency"] == [8, 1]  # halved on each 429/503: 8 -> 4 -> 2 -> 1


def test_a_silent_server_is_closed_then_asked_again_and_said_so(server, problems):
    """The server takes a request and sends nothing: after `timeout_s` of silence on every request in
    flight the connection is closed (the server sees it: a streaming server stops that work) and the
    request sent again; one line says so, results count it as a timeout."""
    task = task_for(problems)
    server.stuck = {"def sub": 1}
    said, context = [], CallContext(say=lambda line: said.append(line))
    started = time.monotonic()
    outs = OpenAIBackend(spec(server, timeout_s="0.5")).generate(
        task, problems, [GenRequest(p.task_id, 0, p.prompt, task.stop_words) for p in problems], context=context)
    assert outs[1].raw == "    return sub_result\n" and time.monotonic() - started < 5
    assert server.closed.wait(5)  # the stuck attempt's connection was closed, not left to the server
    assert sum(1 for r in server.requests if "def sub" in r["prompt"]) == 2
    (line,) = [line for line in said if "no sign of life" in line]
    assert "T/1: no sign of life from the server for 0.5 s" in line and "stall limit now 1 s" in line, said
    assert context.usage["timeouts"] == 1 and context.usage["retries"] == 0


def test_a_malformed_answer_fails_at_once(server, problems):
    from codeeval.generation.api.openai_backend import HTTPError

    task = task_for(problems)
    server.malformed = {"def add"}
    with pytest.raises(HTTPError, match="malformed answer"):
        OpenAIBackend(spec(server, stream="false")).generate(task, problems[:1], [GenRequest("T/0", 0, PROMPTS[0], ())])
    assert len(server.requests) == 1


def test_answers_are_journaled_and_never_asked_twice(server, problems, tmp_path):
    """A call that fails after some answers: the next one sends only what was never answered; one
    whose answers are all journaled sends nothing, and gives the same outputs."""
    from codeeval.generation.api.openai_backend import HTTPError

    task = task_for(problems)
    args = GenerationArgs(do_sample=True, temperature=0.8, n_samples=4, max_new_tokens=8)
    reqs = [GenRequest(p.task_id, s, p.prompt, ()) for p in problems for s in range(4)]
    server.reject = {"def mul": 400}
    with pytest.raises(HTTPError, match="400"):
        OpenAIBackend(spec(server, args, concurrency="1")).generate(task, problems, reqs,
                                                                    context=CallContext(journal=tmp_path))
    answered = len(server.requests) - 1  # all but the rejected one
    assert answered >= 1
    server.reject, server.requests = {}, []
    first = CallContext(journal=tmp_path)
    outs = OpenAIBackend(spec(server, args)).generate(task, problems, reqs, context=first)
    assert len(server.requests) == len(reqs) - answered and first.usage["from_journal"] == answered
    server.requests = []
    again = CallContext(journal=tmp_path)
    assert OpenAIBackend(spec(server, args)).generate(task, problems, reqs, context=again) == outs
    assert server.requests == [] and again.usage["from_journal"] == len(reqs) and again.usage["requests_sent"] == 0
    journal = next((tmp_path / "requests").iterdir())
    assert "sk-test" not in "".join(p.read_text() for p in journal.iterdir())  # the key is nowhere in it


def test_gives_up_after_max_retries_and_reports_client_errors(server, problems):
    from codeeval.generation.api.openai_backend import HTTPError

    task = task_for(problems)
    server.fail_first = {"def sub": 10}
    b = OpenAIBackend(spec(server, max_retries="2"))
    with pytest.raises(HTTPError, match="HTTP"):
        b.generate(task, problems[1:2], [GenRequest("T/1", 0, PROMPTS[1], ())])
    bad = OpenAIBackend(spec(server, api_key="wrong"))
    with pytest.raises(HTTPError, match="401"):
        bad.generate(task, problems[:1], [GenRequest("T/0", 0, PROMPTS[0], ())])


def test_a_failed_request_stops_the_rest(server, problems):
    """A non-retryable error fails the call at once: queued requests are cancelled, not sent."""
    from codeeval.generation.api.openai_backend import HTTPError

    task = task_for(problems)
    server.reject = {"def add": 400}
    args = GenerationArgs(do_sample=True, temperature=0.8, n_samples=40, max_new_tokens=8)
    b = OpenAIBackend(spec(server, args, concurrency="2"))
    reqs = [GenRequest(p.task_id, s, p.prompt, ()) for p in problems for s in range(40)]
    t0 = time.monotonic()
    with pytest.raises(HTTPError, match="400"):
        b.generate(task, problems, reqs)
    elapsed = time.monotonic() - t0
    # the first request fails after ~0.05 s; sending all 120 two at a time takes ~3 s
    assert elapsed < 1.0, elapsed
    time.sleep(0.2)  # let the request that was in flight finish
    assert len(server.requests) <= 4, len(server.requests)


def test_chat_endpoint_extracts_code(server, problems):
    task = task_for(problems)
    args = GenerationArgs(do_sample=False, max_new_tokens=64, apply_chat_template=True)
    b = OpenAIBackend(spec(server, args))
    assert b.endpoint == "chat"
    outs = b.generate(task, problems[:2], [GenRequest(p.task_id, 0, p.prompt, task.stop_words) for p in problems[:2]])
    r = server.requests[0]
    assert r["path"] == "/v1/chat/completions" and r["messages"][0]["role"] == "user"
    assert "stop" not in r  # task stop words would cut a chat answer
    # the answer repeats the prompt: the rest is a continuation, post-processed as usual
    assert outs[0].program is None and outs[0].raw.strip() == "return a + b"
    # the answer rewrote the function: a finished program
    assert outs[1].program == "import math\n\ndef sub(x, y):\n    return x - y\n"


def test_base_url_and_key_from_env(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    b = OpenAIBackend(BackendSpec("openai", "m", GenerationArgs(do_sample=False, max_new_tokens=8)))
    assert b.base_url == server.url and b.api_key == "sk-test"
    assert b.fingerprint().startswith("openai:http://127.0.0.1")


def test_options_are_read_through_the_declaration(server, monkeypatch):
    """codeeval/generation/options.py: the defaults as before, YAML's numbers and booleans read as
    the CLI's strings, a bad value or a name the backend does not take refused at once."""
    monkeypatch.setenv("CODEEVAL_OPENAI_CONCURRENCY", "3")
    args = GenerationArgs(do_sample=False, max_new_tokens=8)
    b = OpenAIBackend(BackendSpec("openai", "m", args, options=(("base_url", server.url),)))
    assert (b.endpoint, b.concurrency, b.max_retries, b.timeout_s, b.stream, b.backoff_s, b.max_stop, b.eos) == (
        "completions", 3, 6, 120.0, True, 1.0, 4, None)
    b = OpenAIBackend(spec(server, args, concurrency=2, stream=False, timeout_s="2.5", endpoint="chat"))
    assert (b.concurrency, b.stream, b.timeout_s, b.endpoint) == (2, False, 2.5, "chat")
    with pytest.raises(ValueError, match=r"^backend option concurrency must be an integer >= 1, not '0'$"):
        OpenAIBackend(spec(server, args, concurrency="0"))
    with pytest.raises(ValueError, match=r"^backend option stream must be yes or no"):
        OpenAIBackend(spec(server, args, stream="sometimes"))
    with pytest.raises(ValueError, match=r"^max_stops is not an option of the openai backend$"):
        OpenAIBackend(spec(server, args, max_stops="2"))
