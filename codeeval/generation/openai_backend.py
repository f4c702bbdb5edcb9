"""OpenAI-compatible HTTP backend: ``/completions`` and ``/chat/completions``.

Works with the OpenAI API and with servers that speak it (vLLM's and SGLang's OpenAI
servers, llama.cpp's server, TGI's Messages API, ...). Standard library only.

Settings come from ``BackendSpec.options`` (the CLI maps its flags onto them), then the
environment, then defaults:

=================  ============================  ===========================================
option             environment                   meaning
=================  ============================  ===========================================
base_url           OPENAI_BASE_URL               default https://api.openai.com/v1
api_key            OPENAI_API_KEY                sent as ``Authorization: Bearer ...``
endpoint                                         ``completions`` or ``chat`` (default: chat
                                                 with --apply_chat_template, else completions)
concurrency        CODEEVAL_OPENAI_CONCURRENCY   requests in flight at once (default 8)
max_retries                                      retries of 429, 5xx and network errors (6)
timeout_s                                        per request (default 120)
backoff_s                                        first retry delay, doubled each time (1.0)
max_stop                                         stop strings sent to the server (default 4,
                                                 OpenAI's limit; the rest are cut locally by
                                                 the benchmark's post-processing)
=================  ============================  ===========================================

The budget is ``--max_new_tokens`` when given, else ``--max_length_generation`` (the
server holds the tokenizer, so the prompt cannot be subtracted here). Sampled requests
carry a per-sample ``seed`` (servers that honour it give reproducible samples); identical
greedy requests are sent once.

Completions: ``raw`` is the returned text (the server strips the stop string it matched;
post-processing cuts at the first stop either way). Chat: the whole answer's code block is
extracted (codeeval/generation/chat.py): a continuation when the code repeats the prompt, else a
finished program.
"""
from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.generation import chat
from codeeval.generation.base import Backend, GenOutput, GenRequest, Progress
from codeeval.generation.requests import Renderer, Rendering, request_stops, to_output
from codeeval.generation.seeds import sample_seed

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class HTTPError(RuntimeError):
    pass


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(self, spec):
        self.spec = spec
        self.args = spec.args
        opts = dict(spec.options)
        self.base_url = (opts.get("base_url") or os.environ.get("OPENAI_BASE_URL")
                         or "https://api.openai.com/v1").rstrip("/")
        self.api_key = opts.get("api_key") or os.environ.get("OPENAI_API_KEY") or ""
        default_ep = "chat" if self.args.apply_chat_template else "completions"
        self.endpoint = opts.get("endpoint", default_ep)
        if self.endpoint not in ("completions", "chat"):
            raise ValueError(f"endpoint must be 'completions' or 'chat', not {self.endpoint!r}")
        self.concurrency = max(1, int(opts.get("concurrency") or os.environ.get("CODEEVAL_OPENAI_CONCURRENCY") or 8))
        self.max_retries = int(opts.get("max_retries", 6))
        self.timeout_s = float(opts.get("timeout_s", 120))
        self.backoff_s = float(opts.get("backoff_s", 1.0))
        self.max_stop = int(opts.get("max_stop", 4))
        self.eos = opts.get("eos_text") or None
        # no tokenizer here: a completions prompt is plain or --instruction_tokens (the server
        # would have to apply a chat template); the chat endpoint sends the instruction
        self.renderer = Renderer(self.args, spec.model, None, chat_template=False,
                                 chat_api=self.endpoint == "chat")

    def fingerprint(self) -> str:
        return f"openai:{self.base_url}:{self.spec.model}:{self.endpoint}"

    def eos_text(self) -> Optional[str]:
        return self.eos  # the server applies its own eos; none to add to the stop words

    # -- HTTP ------------------------------------------------------------------------
    def _post(self, path: str, body: dict) -> dict:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        delay = self.backoff_s
        for attempt in range(self.max_retries + 1):
            req = urllib.request.Request(f"{self.base_url}/{path}", data=data, headers=headers, method="POST")
            retry_after = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as e:
                detail = e.read().decode(errors="replace")[:500]
                if e.code not in RETRY_STATUS or attempt == self.max_retries:
                    raise HTTPError(f"POST {self.base_url}/{path}: HTTP {e.code}: {detail}") from None
                retry_after = e.headers.get("Retry-After") if e.headers else None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as e:
                if attempt == self.max_retries:
                    raise HTTPError(f"POST {self.base_url}/{path}: {e}") from None
            wait = delay * (1 + random.random() * 0.25)
            if retry_after:
                try:
                    wait = max(wait, float(retry_after))
                except ValueError:
                    pass
            time.sleep(wait)
            delay *= 2
        raise AssertionError("unreachable")

    # -- one request -----------------------------------------------------------------
    def _budget(self) -> int:
        a = self.args
        return a.max_new_tokens if a.max_new_tokens is not None else a.max_length_generation

    def _sampling(self, req: GenRequest) -> dict:
        a = self.args
        body = {"max_tokens": self._budget(), "n": 1}
        if a.do_sample:
            body.update(temperature=a.temperature, top_p=a.top_p, seed=sample_seed(a.seed, req.task_id, req.sample))
            if a.top_k and a.top_k > 0 and "api.openai.com" not in self.base_url:
                body["top_k"] = a.top_k  # vLLM, SGLang, llama.cpp accept it; OpenAI rejects it
        else:
            body.update(temperature=0.0, top_p=1.0, seed=a.seed)
        return body

    def _one(self, task: TaskSpec, req: GenRequest, prepared: Rendering) -> GenOutput:
        rendered, fmt = prepared
        if rendered.mode == "messages":
            body = {"model": self.spec.model, "messages": [{"role": "user", "content": rendered.text}]}
            body.update(self._sampling(req))
            resp = self._post("chat/completions", body)
            choice = resp["choices"][0]
            text = (choice.get("message") or {}).get("content") or ""
        else:
            stops = () if rendered.mode == "answer" else request_stops(req.stop, fmt)  # answers run whole
            body = {"model": self.spec.model, "prompt": rendered.text}
            body.update(self._sampling(req))
            if stops and self.max_stop > 0:
                body["stop"] = list(stops[: self.max_stop])
            resp = self._post("completions", body)
            choice = resp["choices"][0]
            text = choice.get("text") or ""
        return to_output(text, _usage(resp), _finish(choice), mode=rendered.mode, fmt=fmt, eos=self.eos,
                         prompt=req.prompt, language=chat.language_of(task))

    # -- batch -----------------------------------------------------------------------
    def generate(self, task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest],
                 progress: Progress = None) -> list[GenOutput]:
        by_id = {p.task_id: p for p in problems}
        groups: dict[tuple, list[int]] = {}
        for i, req in enumerate(requests):
            key = (req.task_id, req.prompt, req.stop) if not self.args.do_sample else (i,)
            groups.setdefault(key, []).append(i)
        prepared: dict[tuple[str, str], Rendering] = {}  # rendered once per prompt, not per sample
        for req in requests:
            if (req.task_id, req.prompt) not in prepared:
                prepared[req.task_id, req.prompt] = self.renderer.render(task, by_id.get(req.task_id), req.prompt)
        outputs: list[Optional[GenOutput]] = [None] * len(requests)
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai")
        try:
            futures = {}
            for idx in groups.values():
                req = requests[idx[0]]
                futures[pool.submit(self._one, task, req, prepared[req.task_id, req.prompt])] = idx
            for fut in as_completed(futures):
                idx = futures[fut]
                out = fut.result()  # an error that outlived its retries fails the shard
                for i in idx:
                    outputs[i] = GenOutput(out.raw, out.n_tokens, out.finish_reason, out.program)
                if progress:
                    progress(len(idx))
        except BaseException:
            # fail at once: queued requests are cancelled (those in flight end on their own)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return outputs  # type: ignore[return-value]


def _usage(resp: dict) -> int:
    usage = resp.get("usage") or {}
    return int(usage.get("completion_tokens") or 0)


def _finish(choice: dict) -> str:
    reason = choice.get("finish_reason") or "stop"
    if reason == "length":
        return "length"
    if reason == "stop" and "stop_reason" in choice and choice["stop_reason"] is None:
        return "eos"  # vLLM tells a stop string from eos; OpenAI does not
    return "stop" if reason in ("stop", "content_filter", "tool_calls", "function_call") else reason
