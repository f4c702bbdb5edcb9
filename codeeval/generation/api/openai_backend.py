"""OpenAI-compatible HTTP backend: ``/completions`` and ``/chat/completions``.

Works with the OpenAI API and with servers that speak it (vLLM's and SGLang's OpenAI servers,
llama.cpp's server, ``transformers serve``, TGI's Messages API, ...). Standard library only; the HTTP
side (streaming, the stall timeout, retries, concurrency that backs off) is
codeeval/generation/api/client.py, the request journal codeeval/generation/api/journal.py.

Settings come from ``BackendSpec.options`` (the CLI maps its flags onto them; declared with their
defaults in codeeval/generation/options.py, listed in docs/generation.md), then the environment
(OPENAI_BASE_URL, OPENAI_API_KEY, CODEEVAL_OPENAI_CONCURRENCY), then defaults.

The budget is ``--max_new_tokens`` when given, else ``--max_length_generation`` (the
server holds the tokenizer, so the prompt cannot be subtracted here). Sampled requests
carry a per-sample ``seed`` (servers that honour it give reproducible samples); identical
greedy requests are sent once, and a request the journal holds an answer to is not sent.

Completions: ``raw`` is the returned text (the server strips the stop string it matched;
post-processing cuts at the first stop either way). Chat: the whole answer's code block is
extracted (codeeval/generation/prompts/chat.py): a continuation when the code repeats the prompt, else a
finished program.
"""
from __future__ import annotations

import dataclasses
import os
import queue
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.generation import options
from codeeval.generation.api.client import Client, HTTPError  # noqa: F401 - HTTPError: what a failed call raises
from codeeval.generation.api.journal import Journal, journal_dir, request_key
from codeeval.generation.api.pace import Cancelled
from codeeval.generation.base import Backend, CallContext, GenOutput, GenRequest, Progress
from codeeval.generation.prompts import chat
from codeeval.generation.prompts.requests import Renderer, Rendering, request_stops, to_output
from codeeval.generation.prompts.seeds import sample_seed

COUNTED = {"timeout": "timeouts", "retry": "retries", "slower": "slowdowns"}


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(self, spec):
        self.spec = spec
        self.args = spec.args
        opts = options.parse(self.name, spec.options)  # codeeval/generation/options.py
        self.base_url = (opts["base_url"] or os.environ.get("OPENAI_BASE_URL")
                         or "https://api.openai.com/v1").rstrip("/")
        self.api_key = opts["api_key"] or os.environ.get("OPENAI_API_KEY") or ""
        self.endpoint = opts["endpoint"] or ("chat" if self.args.apply_chat_template else "completions")
        self.concurrency = opts["concurrency"] or max(1, int(os.environ.get("CODEEVAL_OPENAI_CONCURRENCY") or 8))
        self.max_retries = opts["max_retries"]
        self.timeout_s = opts["timeout_s"]
        self.stream = opts["stream"]
        self.backoff_s = opts["backoff_s"]
        self.max_stop = opts["max_stop"]
        self.eos = opts["eos_text"] or None
        self.thinking_switches = {k: v for k, v in (("reasoning_effort", opts["reasoning_effort"]),) if v}
        if self.args.enable_thinking is not None:  # the server's chat template's switch (vLLM, SGLang)
            self.thinking_switches["chat_template_kwargs"] = {"enable_thinking": self.args.enable_thinking}
        # no tokenizer here: a completions prompt is plain or --instruction_tokens (the server
        # would have to apply a chat template); the chat endpoint sends the instruction
        self.renderer = Renderer(self.args, spec.model, None, chat_template=False,
                                 chat_api=self.endpoint == "chat")

    def fingerprint(self) -> str:
        return f"openai:{self.base_url}:{self.spec.model}:{self.endpoint}"

    def eos_text(self) -> Optional[str]:
        return self.eos  # the server applies its own eos; none to add to the stop words

    # -- one request -----------------------------------------------------------------
    def _budget(self) -> int:
        a = self.args
        answer = a.max_new_tokens if a.max_new_tokens is not None else a.max_length_generation
        return answer + (a.thinking_budget or 0)  # the thinking's tokens count in max_tokens

    def _sampling(self, req: GenRequest) -> dict:
        a = self.args
        # no `n`: 1 is every server's default, and some reject the field
        body = {"max_tokens": self._budget(), **self.thinking_switches}
        if a.thinking_budget is not None:
            body["thinking_token_budget"] = a.thinking_budget  # vLLM's cap (with --reasoning-config)
        if a.do_sample:
            body.update(temperature=a.temperature, top_p=a.top_p, seed=sample_seed(a.seed, req.task_id, req.sample))
            if a.top_k and a.top_k > 0 and "api.openai.com" not in self.base_url:
                body["top_k"] = a.top_k  # vLLM, SGLang, llama.cpp accept it; OpenAI rejects it
        else:
            body.update(temperature=0.0, top_p=1.0, seed=a.seed)
        return body

    def _request(self, req: GenRequest, prepared: Rendering) -> tuple[str, dict]:
        """(path, body) of one request."""
        rendered, fmt = prepared
        if rendered.mode == "messages":
            return "chat/completions", {"model": self.spec.model, "messages": [{"role": "user", "content": rendered.text}],
                                        **self._sampling(req)}
        stops = () if rendered.mode == "answer" else request_stops(req.stop, fmt)  # answers run whole
        body = {"model": self.spec.model, "prompt": rendered.text, **self._sampling(req)}
        if stops and self.max_stop > 0:
            body["stop"] = list(stops[: self.max_stop])
        return "completions", body

    def _output(self, task: TaskSpec, req: GenRequest, prepared: Rendering, answer: dict) -> GenOutput:
        rendered, fmt = prepared
        usage = answer.get("usage") or {}
        thought = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")  # OpenAI's, vLLM's
        return to_output(answer.get("text") or "", int(usage.get("completion_tokens") or 0), _finish(answer),
                         mode=rendered.mode, fmt=fmt, eos=self.eos, prompt=req.prompt, language=chat.language_of(task),
                         tags=self.renderer.tags, reasoning=answer.get("reasoning") or "",
                         thinking_tokens=int(thought) if thought is not None else None)

    # -- batch -----------------------------------------------------------------------
    def generate(self, task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest],
                 progress: Progress = None, context: Optional[CallContext] = None) -> list[GenOutput]:
        context = context or CallContext()
        by_id = {p.task_id: p for p in problems}
        groups: dict[tuple, list[int]] = {}
        for i, req in enumerate(requests):
            key = (req.task_id, req.prompt, req.stop) if not self.args.do_sample else (i,)
            groups.setdefault(key, []).append(i)
        prepared: dict[tuple[str, str], Rendering] = {}  # rendered once per prompt, not per sample
        for req in requests:
            if (req.task_id, req.prompt) not in prepared:
                prepared[req.task_id, req.prompt] = self.renderer.render(task, by_id.get(req.task_id), req.prompt)
        journal = Journal(journal_dir(context.journal, self.base_url, self.spec.model)) if context.journal else None
        outputs: list[Optional[GenOutput]] = [None] * len(requests)
        tally = Tally()
        lines: queue.Queue = queue.Queue()
        client = Client(self.base_url, self.api_key, stream=self.stream, stall_s=self.timeout_s,
                        concurrency=self.concurrency, max_retries=self.max_retries, backoff_s=self.backoff_s,
                        note=lambda kind, line: lines.put((kind, line)))

        def settle(idx: list[int], answer: dict) -> None:
            req = requests[idx[0]]
            out = self._output(task, req, prepared[req.task_id, req.prompt], answer)
            for i in idx:
                outputs[i] = dataclasses.replace(out)
            if progress:
                progress(len(idx))

        def send(path: str, body: dict, key: str, label: str) -> dict:
            try:
                answer = client.post(path, body, label).record()
            except BaseException:
                client.close()  # now, in this thread: no request starts after one failed for good
                raise
            if journal is not None:
                journal.put(key, answer)  # kept before anything else happens to it
            return answer

        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai")
        futures = {}
        started = time.monotonic()
        try:
            for idx in groups.values():
                req = requests[idx[0]]
                path, body = self._request(req, prepared[req.task_id, req.prompt])
                key = request_key(f"{self.base_url}/{path}", body)
                if journal is not None and (kept := journal.get(key)) is not None:
                    tally.add(kept, "from_journal")
                    settle(idx, kept)
                    continue
                label = req.task_id if not self.args.do_sample else f"{req.task_id} sample {req.sample}"
                futures[pool.submit(send, path, body, key, label)] = idx
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                self._say(lines, context, tally)
                for fut in done:
                    if isinstance(fut.exception(), Cancelled):
                        continue  # stopped by the failure that the failed request's own future raises
                    answer = fut.result()  # an error that outlived its retries fails the shard
                    tally.add(answer, "answered")
                    settle(futures[fut], answer)
        except BaseException:
            # fail at once: queued requests are cancelled (those in flight end on their own)
            client.close()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            self._say(lines, context, tally)
            if journal is not None:
                journal.close()
        client.close()
        pool.shutdown(wait=True)
        context.usage.update(tally.usage(client, time.monotonic() - started if futures else 0.0))
        return outputs  # type: ignore[return-value]

    def _say(self, lines: queue.Queue, context: CallContext, tally: "Tally") -> None:
        """The notes of the client's threads, said from the shard's own thread (its log is the terminal's)."""
        while True:
            try:
                kind, line = lines.get_nowait()
            except queue.Empty:
                return
            tally.counts[COUNTED[kind]] += 1
            context.say(f"openai {self.base_url}: {line}")


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


def _finish(answer: dict) -> str:
    reason = answer.get("finish_reason") or "stop"
    if reason == "length":
        return "length"
    if reason == "stop" and "stop_reason" in answer and answer["stop_reason"] is None:
        return "eos"  # vLLM tells a stop string from eos; OpenAI does not
    return "stop" if reason in ("stop", "content_filter", "tool_calls", "function_call") else reason
