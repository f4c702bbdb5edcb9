"""HTTP to one OpenAI-compatible server: requests streamed, the server's signs of life watched over
every request in flight, retries that never pile work onto a busy server.

Why streaming with a stall timeout, and not a per-request timeout. A server queues what it cannot
compute yet (`transformers serve` computes one request at a time, vLLM as many as its batch holds): a
request that waits its turn is not lost, and sending it again only queues a second copy behind the
first, which the server computes too. A per-request timeout cannot tell the two apart; a stream can.
So a request is abandoned only when the server has sent nothing, on any of this call's connections,
for `stall_s` (Watch): while it streams tokens to one request, the others wait. Then every request in
flight is closed (a streaming server stops the work of a closed stream: vLLM, SGLang, llama.cpp and
transformers all do) and sent again after a backoff; the stall limit doubles each time (a slow first
token is not taken twice for a dead server). Without streaming (`stream=false`) an answer is the only
sign of life, and a closed request may still be computed: the same rule, with less to go on.

An answer is read by its Content-Type, not by what was asked: a JSON body is a whole answer even to a
stream request (servers and gateways that ignore `stream` send one), and events are whole with or
without the usage chunk and `data: [DONE]`; only a stream that ended with neither `[DONE]` nor a
finish_reason broke off, and is sent again. Any other body to a 200 (a proxy's text/plain or HTML
page) fails at once: asking again would only get the same page. A reasoning model's thinking, which
vLLM and SGLang (with a reasoning parser), DeepSeek and OpenRouter send beside `content` as
`reasoning_content` or `reasoning`, is kept apart from the answer's text.

Concurrency backs off when answers slow down (codeeval/generation/api/pace.py).

Every retry and timeout is reported through `note(kind, line)`, one line each.
"""
from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Optional

from codeeval.generation.api.pace import Pace, Watch

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
BUSY_STATUS = {429, 503}
CONNECT_S = 30.0


class HTTPError(RuntimeError):
    """A request that failed for good: a client error, a malformed answer, or retries spent."""


class _Retry(Exception):
    """A failed attempt worth another; `slower`: why it also means the server wants fewer requests."""

    def __init__(self, why: str, kind: str = "retry", slower: Optional[str] = None, after: Optional[float] = None):
        super().__init__(why)
        self.kind, self.slower, self.after = kind, slower, after


@dataclass
class Answer:
    text: str
    finish_reason: Optional[str]
    usage: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)  # `stop_reason` where the server gives one (vLLM)
    first_s: Optional[float] = None  # seconds from sending to the first token, thinking or not (streaming only)
    reasoning: str = ""  # a reasoning model's thinking, sent apart from `text`

    def record(self) -> dict:
        """The journal's record; `reasoning` only where there was some, so that other records stay as they were."""
        record = {"text": self.text, "finish_reason": self.finish_reason, "usage": self.usage, **self.extra}
        if self.reasoning:
            record["reasoning"] = self.reasoning
        return record


class Client:
    """POSTs to `base_url` with retries; one per backend call (its Watch and Pace are the call's)."""

    def __init__(self, base_url: str, api_key: str, *, stream: bool, stall_s: float, concurrency: int,
                 max_retries: int, backoff_s: float, note: Callable[[str, str], None]):
        self.url = urllib.parse.urlsplit(base_url)
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream" if stream else
                        "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.stream, self.max_retries, self.backoff_s, self.note = stream, max_retries, backoff_s, note
        self.watch = Watch(stall_s)
        self.pace = Pace(concurrency)
        self.sent = 0
        self._count = threading.Lock()

    def post(self, path: str, body: dict, label: str) -> Answer:
        """The answer to `body`; HTTPError when it failed for good. Each retry and timeout is noted."""
        if self.stream:
            body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        data = json.dumps(body).encode()
        delay = self.backoff_s
        for attempt in range(self.max_retries + 1):
            epoch = self.pace.acquire()
            try:
                answer = self._attempt(path, data)
            except _Retry as retry:
                said = self.pace.release(epoch, busy=retry.slower)
                if attempt == self.max_retries:
                    raise HTTPError(f"POST {self._where(path)}: {retry} (after {attempt + 1} attempts)") from None
                wait = max(delay * (1 + random.random() * 0.25), retry.after or 0.0)
                self.note(retry.kind, f"{label}: {retry}; sent again in {wait:.1f} s "
                                      f"(attempt {attempt + 2} of {self.max_retries + 1})")
                if said:
                    self.note("slower", said)
                time.sleep(wait)
                delay *= 2
                continue
            except BaseException:
                self.pace.release(epoch)
                raise
            if said := self.pace.release(epoch, answer.first_s):
                self.note("slower", said)
            return answer
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.pace.close()
        self.watch.close()

    def _where(self, path: str) -> str:
        return f"{urllib.parse.urlunsplit(self.url).rstrip('/')}/{path}"

    def _connect(self) -> http.client.HTTPConnection:
        """A connection to the server, through the proxy that the environment names for it (as urllib)."""
        https = self.url.scheme == "https"
        host, port = self.url.hostname, self.url.port or (443 if https else 80)
        proxy = urllib.request.getproxies().get(self.url.scheme)
        if proxy and not urllib.request.proxy_bypass(f"{host}:{port}"):
            via = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
            conn = (http.client.HTTPSConnection(via.hostname, via.port or 443, timeout=CONNECT_S,
                                                context=ssl.create_default_context()) if via.scheme == "https"
                    else http.client.HTTPConnection(via.hostname, via.port or 80, timeout=CONNECT_S))
            conn.set_tunnel(host, port)
        elif https:
            conn = http.client.HTTPSConnection(host, port, timeout=CONNECT_S, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(host, port, timeout=CONNECT_S)
        conn.connect()
        conn.sock.settimeout(None)  # the Watch decides when the server is silent for too long
        return conn

    def _attempt(self, path: str, data: bytes) -> Answer:
        try:
            conn = self._connect()
        except OSError as e:
            raise _Retry(f"cannot connect to {self._where(path)}: {e}") from None
        with self._count:
            self.sent += 1
        self.watch.opened(conn)
        sent = time.monotonic()
        try:
            conn.request("POST", f"{self.url.path.rstrip('/')}/{path}", body=data, headers=self.headers)
            resp = conn.getresponse()
            self.watch.alive()
            if resp.status != 200:
                raise _status(resp, self._where(path))
            kind = _media_type(resp)
            if kind == "application/json" or kind.endswith("+json") or (not kind and not self.stream):
                return _read_json(resp)  # a whole answer, even to a stream request
            if kind != "text/event-stream" and kind:
                raise HTTPError(f"POST {self._where(path)}: the server answered {kind}, not an OpenAI "
                                f"response: {_excerpt(resp)}")
            answer = _read_stream(resp, self.watch, sent)
            if answer.finish_reason is None:
                raise ConnectionError("the answer's stream broke off (neither [DONE] nor a finish_reason came)")
            return answer
        except (OSError, http.client.HTTPException) as e:
            if self.watch.closed(conn):
                raise _Retry(f"no sign of life from the server for {self.watch.fired_s:g} s on any request "
                             f"in flight: closed after {time.monotonic() - sent:.1f} s (stall limit now "
                             f"{self.watch.stall_s:g} s)", kind="timeout", slower="a stalled server") from None
            raise _Retry(f"{type(e).__name__}: {e}") from None  # post() names the URL once
        finally:
            self.watch.closed(conn)
            conn.close()


def _media_type(resp) -> str:
    """The body's media type, lowercased and without parameters (`; charset=utf-8`); "" when unnamed."""
    return (resp.getheader("Content-Type") or "").split(";", 1)[0].strip().lower()


def _excerpt(resp) -> str:
    """The body's start on one line, to quote in an error."""
    return " ".join(resp.read(65536).decode(errors="replace").split())[:300]


def _thinking(part: dict) -> str:
    """A reasoning model's thinking in a message or delta: `reasoning_content` (vLLM, SGLang, DeepSeek)
    or `reasoning` (newer vLLM, OpenRouter); servers that send both send the same text."""
    for name in ("reasoning_content", "reasoning"):
        if isinstance(part.get(name), str) and part[name]:
            return part[name]
    return ""


def _status(resp, where: str) -> Exception:
    detail = _excerpt(resp)
    if resp.status not in RETRY_STATUS:
        return HTTPError(f"POST {where}: HTTP {resp.status}: {detail}")
    after = resp.getheader("Retry-After")
    try:
        after_s = float(after) if after else None
    except ValueError:
        after_s = None
    return _Retry(f"HTTP {resp.status} from {where}: {detail}", after=after_s,
                  slower=f"HTTP {resp.status} (the server is busy)" if resp.status in BUSY_STATUS else None)


def _read_json(resp) -> Answer:
    raw = resp.read()
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        raise HTTPError(f"a malformed answer (not an OpenAI response): {raw[:200]!r}") from None
    message = choice.get("message") or {}
    text = choice.get("text") if "text" in choice else message.get("content")
    extra = {"stop_reason": choice["stop_reason"]} if "stop_reason" in choice else {}
    return Answer(text or "", choice.get("finish_reason") or "stop", data.get("usage") or {}, extra,
                  reasoning=_thinking(message))


def _read_stream(resp, watch: Watch, sent: float) -> Answer:
    """Server-sent events: `data: {chunk}` lines until `data: [DONE]` or the end of the stream. The
    answer is whole once a chunk gave its finish_reason, or at `[DONE]` ("stop" if none came); its
    finish_reason stays None when the stream broke off before either."""
    parts: list[str] = []
    thought: list[str] = []
    answer = Answer("", None)
    while True:
        try:
            line = resp.readline()
        except (OSError, http.client.HTTPException):
            if answer.finish_reason is None:
                raise
            break  # the text was whole; only the usage or [DONE] was lost
        if not line:
            break
        watch.alive()
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            answer.finish_reason = answer.finish_reason or "stop"
            break
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise HTTPError(f"a malformed event in the answer's stream: {payload[:200]!r}") from None
        if chunk.get("error"):
            raise _Retry(f"the server failed mid-answer: {str(chunk['error'])[:300]}")
        answer.usage = chunk.get("usage") or answer.usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            piece = choice.get("text") if "text" in choice else delta.get("content")
            thinking = _thinking(delta)
            if (piece or thinking) and answer.first_s is None:
                answer.first_s = time.monotonic() - sent
            if piece:
                parts.append(piece)
            if thinking:
                thought.append(thinking)
            if choice.get("finish_reason"):
                answer.finish_reason = choice["finish_reason"]
                if "stop_reason" in choice:
                    answer.extra["stop_reason"] = choice["stop_reason"]
    answer.text, answer.reasoning = "".join(parts), "".join(thought)
    return answer
