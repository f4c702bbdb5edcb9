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

Concurrency backs off when answers slow down (codeeval/generation/api_pace.py).

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

from codeeval.generation.api_pace import Pace, Watch

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
    first_s: Optional[float] = None  # seconds from sending to the first token (streaming only)

    def record(self) -> dict:
        return {"text": self.text, "finish_reason": self.finish_reason, "usage": self.usage, **self.extra}


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
            answer = _read_stream(resp, self.watch, sent) if self.stream else _read_json(resp)
            if answer.finish_reason is None:
                raise ConnectionError("the answer ended before its last chunk")
            return answer
        except (OSError, http.client.HTTPException) as e:
            if self.watch.closed(conn):
                raise _Retry(f"no sign of life from the server for {self.watch.fired_s:g} s on any request "
                             f"in flight: closed after {time.monotonic() - sent:.1f} s (stall limit now "
                             f"{self.watch.stall_s:g} s)", kind="timeout", slower="a stalled server") from None
            raise _Retry(f"POST {self._where(path)}: {type(e).__name__}: {e}") from None
        finally:
            self.watch.closed(conn)
            conn.close()


def _status(resp, where: str) -> Exception:
    detail = " ".join(resp.read().decode(errors="replace").split())[:300]
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
    text = choice.get("text") if "text" in choice else (choice.get("message") or {}).get("content")
    extra = {"stop_reason": choice["stop_reason"]} if "stop_reason" in choice else {}
    return Answer(text or "", choice.get("finish_reason") or "stop", data.get("usage") or {}, extra)


def _read_stream(resp, watch: Watch, sent: float) -> Answer:
    """Server-sent events: `data: {chunk}` lines until `data: [DONE]` or the end of the stream."""
    parts: list[str] = []
    answer = Answer("", None)
    while line := resp.readline():
        watch.alive()
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            break
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise HTTPError(f"a malformed event in the answer's stream: {payload[:200]!r}") from None
        if chunk.get("error"):
            raise _Retry(f"the server failed mid-answer: {str(chunk['error'])[:300]}")
        answer.usage = chunk.get("usage") or answer.usage
        for choice in chunk.get("choices") or ():
            piece = choice.get("text") if "text" in choice else (choice.get("delta") or {}).get("content")
            if piece:
                answer.first_s = answer.first_s if answer.first_s is not None else time.monotonic() - sent
                parts.append(piece)
            if choice.get("finish_reason"):
                answer.finish_reason = choice["finish_reason"]
                if "stop_reason" in choice:
                    answer.extra["stop_reason"] = choice["stop_reason"]
    answer.text = "".join(parts)
    return answer
