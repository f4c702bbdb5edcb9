"""The openai backend reads an answer in every shape the API allows (issue 50): a JSON body although a
stream was asked, events with or without the usage chunk and `data: [DONE]`, a reasoning model's
thinking beside the content; it sends a request again only when its answer really broke off, and
fails at once, in one line, on a body that is no OpenAI response. A small HTTP/1.1 server on
127.0.0.1 answers as real servers do (chunked events, as uvicorn sends vLLM's and SGLang's) and
counts the requests: one per prompt wherever the answer arrived whole."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.generation import BackendSpec, GenerationArgs, GenRequest
from codeeval.generation.api.client import Answer, Client, HTTPError
from codeeval.generation.api.openai_backend import OpenAIBackend
from codeeval.generation.base import CallContext

PROMPT = "def add(a, b):\n"
CODE = "    return a + b\n"
CHAT = f"Here it is:\n```python\ndef add(a, b):\n{CODE}```"
USAGE = {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}


class Server:
    """Answers the n-th request (from 0) with `answers[min(n, len - 1)](handler, body)`."""

    def __init__(self, *answers):
        self.answers, self.requests = list(answers), []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    n = len(server.requests)
                    server.requests.append({"path": self.path, **body})
                server.answers[min(n, len(server.answers) - 1)](self, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(*answers):
        servers.append(Server(*answers))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


# -- answers, as the servers send them ----------------------------------------------------------
def body(handler, status, data, ctype, headers=()):
    data = data.encode() if isinstance(data, str) else data
    handler.send_response(status)
    handler.send_header("Content-Type", ctype)
    handler.send_header("Content-Length", str(len(data)))
    for k, v in headers:
        handler.send_header(k, v)
    handler.end_headers()
    handler.wfile.write(data)


def whole(chat=False, text=None, reasoning=None, ctype="application/json; charset=utf-8"):
    """A stream-less answer (what a server that ignores `stream` sends)."""
    def answer(handler, req):
        if chat:
            message = {"role": "assistant", "content": CHAT if text is None else text, **(reasoning or {})}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        else:
            choice = {"index": 0, "text": CODE, "logprobs": None, "finish_reason": "stop", "stop_reason": None}
        obj = {"id": "x-1", "object": "chat.completion" if chat else "text_completion", "created": 0,
               "model": req["model"], "choices": [choice], "usage": USAGE}
        body(handler, 200, json.dumps(obj), ctype)
    return answer


def events(pieces, finish="stop", usage=True, done=True, chat=False, drop="", pause=0.0):
    """Server-sent events, chunked: a chunk per piece (a str: content; a dict: the delta itself), a
    last chunk with `finish` (None: none), the usage chunk, `data: [DONE]`; `drop`: the connection
    ends without the chunked body's end, "mid" after the pieces, "late" after the finish_reason's
    chunk; `pause`: seconds after the first piece."""
    def answer(handler, req):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def write(data):
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            handler.wfile.flush()

        def event(choices, **more):
            obj = {"id": "x-1", "object": "chat.completion.chunk" if chat else "text_completion",
                   "created": 0, "model": req["model"], "choices": choices, **more}
            write(f"data: {json.dumps(obj)}\n\n".encode())

        for i, piece in enumerate(pieces):
            part = piece if isinstance(piece, dict) else {"content": piece}
            event([{"index": 0, **({"delta": part} if chat else {"text": piece}), "finish_reason": None}])
            if i == 0:
                time.sleep(pause)
        if drop == "mid":
            handler.close_connection = True
            return
        if finish:
            event([{"index": 0, **({"delta": {}} if chat else {"text": ""}), "finish_reason": finish}])
        if drop == "late":
            handler.close_connection = True
            return
        if usage:
            event([], usage=USAGE)
        if done:
            write(b"data: [DONE]\n\n")
        write(b"")  # the chunked body's end
    return answer


def status(code, data, ctype="text/plain; charset=utf-8", headers=()):
    return lambda handler, req: body(handler, code, data, ctype, headers)


# -- driving the backend ------------------------------------------------------------------------
def generate(server, chat=False, **opts):
    """The backend's outputs, its call's usage and said lines; one prompt, greedy."""
    problem = Problem("T/0", 0, PROMPT, {})
    task = TaskSpec("toy", "toy", lambda o: [problem], ("\ndef",), lambda p, raw, extra: p.prompt + raw,
                    lambda p: "", ())
    args = GenerationArgs(do_sample=False, max_new_tokens=64, apply_chat_template=chat)
    options = {"base_url": server.url, "backoff_s": "0.01", **opts}
    backend = OpenAIBackend(BackendSpec("openai", "toy-model", args, options=tuple(sorted(options.items()))))
    said: list[str] = []
    context = CallContext(say=said.append)
    outs = backend.generate(task, [problem], [GenRequest("T/0", 0, PROMPT, task.stop_words)], context=context)
    return outs, context.usage, said


def post(server, path="chat/completions", stream=True) -> Answer:
    notes = []
    client = Client(server.url, "", stream=stream, stall_s=5.0, concurrency=1, max_retries=2, backoff_s=0.01,
                    note=lambda kind, line: notes.append(line))
    try:
        body = {"model": "toy-model", "max_tokens": 64}
        body.update({"messages": [{"role": "user", "content": "add"}]} if path.startswith("chat") else
                    {"prompt": PROMPT})
        return client.post(path, body, "T/0")
    finally:
        client.close()
        assert notes == [], notes  # every answer here arrives whole at once


# -- the shapes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_a_json_body_to_a_stream_request_is_a_whole_answer(serve, chat):
    server = serve(whole(chat=chat))
    outs, usage, said = generate(server, chat=chat)
    assert len(server.requests) == 1 and server.requests[0]["stream"] is True  # a stream was asked for
    assert server.requests[0]["path"] == ("/v1/chat/completions" if chat else "/v1/completions")
    assert outs[0].raw.strip() == CODE.strip() and outs[0].n_tokens == 7, outs
    assert usage["retries"] == 0 and usage["requests_sent"] == 1 and usage["sent_completion_tokens"] == 7
    assert said == []


def test_events_without_the_usage_chunk(serve):
    server = serve(events(["    return", " a + b\n"], usage=False))
    outs, usage, said = generate(server)
    assert len(server.requests) == 1 and outs[0].raw == CODE and outs[0].finish_reason == "stop"
    assert usage["retries"] == 0 and usage["sent_completion_tokens"] == 0 and said == []


def test_events_without_done_but_with_a_finish_reason(serve):
    server = serve(events(["    return", " a + b\n"], finish="length", done=False))
    outs, usage, said = generate(server)
    assert len(server.requests) == 1 and outs[0].raw == CODE and outs[0].finish_reason == "length"
    assert usage["retries"] == 0 and usage["sent_completion_tokens"] == 7 and said == []


def test_events_with_done_and_no_finish_reason(serve):
    server = serve(events(["    return", " a + b\n"], finish=None, usage=False))
    outs, usage, said = generate(server)
    assert len(server.requests) == 1 and outs[0].raw == CODE and outs[0].finish_reason == "stop"
    assert usage["retries"] == 0 and said == []


def test_a_stream_dropped_after_its_finish_reason_is_whole(serve):
    """The text and its finish_reason came; only the usage chunk and [DONE] were lost."""
    server = serve(events(["    return", " a + b\n"], drop="late"))
    outs, usage, said = generate(server)
    assert len(server.requests) == 1 and outs[0].raw == CODE and outs[0].finish_reason == "stop"
    assert usage["retries"] == 0 and said == []


@pytest.mark.parametrize("drop", [False, True], ids=["ended", "dropped"])
def test_a_stream_that_breaks_off_is_sent_again(serve, drop):
    """Neither [DONE] nor a finish_reason: the stream ended (or its connection dropped) mid-answer."""
    server = serve(events(["    return"], finish=None, usage=False, done=False, drop="mid" if drop else ""),
                   events(["    return", " a + b\n"]))
    outs, usage, said = generate(server)
    assert len(server.requests) == 2 and outs[0].raw == CODE
    (line,) = said
    assert "v1: T/0: ConnectionError: " in line and "sent again" in line and "\n" not in line, said
    assert "the answer's stream broke off (neither [DONE] nor a finish_reason came)" in line
    assert usage["retries"] == 1 and usage["requests_sent"] == 2 and usage["answered"] == 1


@pytest.mark.parametrize("stream", ["yes", "no"])
def test_a_200_text_plain_body_fails_at_once_in_one_line(serve, stream):
    server = serve(status(200, "upstream connect error or disconnect/reset before headers.\n"
                               "  reset reason: connection failure\n" + "x" * 1000))
    with pytest.raises(HTTPError) as failed:
        generate(server, stream=stream)
    assert len(server.requests) == 1
    message = str(failed.value)
    assert message.startswith(f"POST {server.url}/completions: the server answered text/plain, not an OpenAI "
                              "response: upstream connect error or disconnect/reset before headers. reset reason: "
                              "connection failure xxx"), message
    assert "\n" not in message and len(message) < 450, message


def test_a_non_200_text_body_is_one_line(serve):
    server = serve(status(400, "<html>\n<body>\n  Bad   request\n</body>\n</html>\n", "text/html"))
    with pytest.raises(HTTPError) as failed:
        generate(server)
    assert str(failed.value) == f"POST {server.url}/completions: HTTP 400: <html> <body> Bad request </body> </html>"
    assert len(server.requests) == 1
    server = serve(status(502, "bad\ngateway\n"))
    with pytest.raises(HTTPError) as failed:
        generate(server, max_retries="1")
    assert str(failed.value) == (f"POST {server.url}/completions: HTTP 502 from {server.url}/completions: "
                                 "bad gateway (after 2 attempts)")
    assert len(server.requests) == 2


def test_a_429_with_retry_after_0_is_retried_once(serve):
    server = serve(status(429, json.dumps({"error": {"message": "rate limited"}}), "application/json",
                          [("Retry-After", "0")]), events(["    return", " a + b\n"]))
    started = time.monotonic()
    outs, usage, said = generate(server)
    assert len(server.requests) == 2 and outs[0].raw == CODE and time.monotonic() - started < 3
    (line,) = [line for line in said if "sent again" in line]
    assert "T/0: HTTP 429 from" in line and "rate limited" in line and "attempt 2 of 7" in line, said
    assert usage["retries"] == 1 and usage["requests_sent"] == 2


# -- reasoning models ---------------------------------------------------------------------------
def test_reasoning_content_in_a_json_answer(serve):
    """vLLM with --reasoning-parser (and DeepSeek's API), streaming off."""
    server = serve(whole(chat=True, text="4", reasoning={"reasoning_content": "2 + 2 is 4."}))
    answer = post(server, stream=False)
    assert (answer.text, answer.reasoning, answer.finish_reason) == ("4", "2 + 2 is 4.", "stop")
    assert answer.record() == {"text": "4", "finish_reason": "stop", "usage": USAGE, "reasoning": "2 + 2 is 4."}
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", ["reasoning_content", "reasoning"])
def test_reasoning_in_a_stream(serve, name):
    """vLLM streams `reasoning_content` pieces (newer vLLM, OpenRouter and gpt-oss: `reasoning`) before
    the content's; the first of them is the first token."""
    pieces = [{name: "Two", "content": None}, {name: " and two"}, {name: " is four."}, {"content": "4"},
              {"content": "\n"}]
    server = serve(events(pieces, chat=True, pause=0.5))  # the first piece, then half a second of thinking
    answer = post(server)
    assert answer.text == "4\n" and answer.reasoning == "Two and two is four." and answer.finish_reason == "stop"
    assert answer.first_s is not None and answer.first_s < 0.4, answer.first_s
    assert answer.record()["reasoning"] == "Two and two is four." and len(server.requests) == 1


def test_answers_without_thinking_record_as_before(serve):
    """Records are kept in the journal: one without thinking has no `reasoning` key."""
    server = serve(events(["    return", " a + b\n"]))
    answer = post(server, "completions")
    assert answer.reasoning == "" and answer.record() == {"text": CODE, "finish_reason": "stop", "usage": USAGE}
    server = serve(whole(chat=True, text="4", reasoning={"reasoning_content": None}))
    assert post(server).record() == {"text": "4", "finish_reason": "stop", "usage": USAGE}
