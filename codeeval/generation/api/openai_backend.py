"""OpenAI-compatible HTTP backend: ``/completions`` and ``/chat/completions``.

Works with the OpenAI API and with servers that speak it (vLLM's and SGLang's OpenAI servers,
llama.cpp's server, ``transformers serve``, TGI's Messages API, ...). Standard library only; the HTTP
side (streaming, the stall timeout, retries, concurrency that backs off) is
codeeval/generation/api/client.py, the request journal codeeval/generation/api/journal.py, a call's
requests in flight codeeval/generation/api/batch.py.

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
from typing import Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core.progress import Progress
from codeeval.generation import options
from codeeval.generation.api.batch import Batch, Job, groups
from codeeval.generation.api.client import Client, HTTPError  # noqa: F401 - HTTPError: what a failed call raises
from codeeval.generation.api.journal import Journal, journal_dir
from codeeval.generation.base import Backend, CallContext, GenOutput, GenRequest
from codeeval.generation.prompts import chat
from codeeval.generation.prompts.requests import Renderer, Rendering, request_stops, to_output
from codeeval.generation.prompts.seeds import sample_seed


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
            messages = [{"role": "user", "content": rendered.text}]
            return "chat/completions", {"model": self.spec.model, "messages": messages, **self._sampling(req)}
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
        prepared: dict[tuple[str, str], Rendering] = {}  # rendered once per prompt, not per sample
        for req in requests:
            if (req.task_id, req.prompt) not in prepared:
                prepared[req.task_id, req.prompt] = self.renderer.render(task, by_id.get(req.task_id), req.prompt)
        outputs: list[Optional[GenOutput]] = [None] * len(requests)

        def settle(rows: list[int], answer: dict) -> None:
            req = requests[rows[0]]
            out = self._output(task, req, prepared[req.task_id, req.prompt], answer)
            for i in rows:
                outputs[i] = dataclasses.replace(out)
            if progress:
                progress(len(rows))

        sampled = self.args.do_sample  # each sample its own request; identical greedy ones sent once
        jobs = []
        for rows in groups(len(requests), lambda i: (i,) if sampled else (
                requests[i].task_id, requests[i].prompt, requests[i].stop)):
            req = requests[rows[0]]
            path, body = self._request(req, prepared[req.task_id, req.prompt])
            jobs.append(Job(rows, path, body, f"{req.task_id} sample {req.sample}" if sampled else req.task_id))
        batch = Batch(self.base_url, context.say)
        client = Client(self.base_url, self.api_key, stream=self.stream, stall_s=self.timeout_s,
                        concurrency=self.concurrency, max_retries=self.max_retries, backoff_s=self.backoff_s,
                        note=batch.note)
        journal = Journal(journal_dir(context.journal, self.base_url, self.spec.model)) if context.journal else None
        context.usage.update(batch.answer(client, self.concurrency, jobs, settle, journal))
        return outputs  # type: ignore[return-value]


def _finish(answer: dict) -> str:
    reason = answer.get("finish_reason") or "stop"
    if reason == "length":
        return "length"
    if reason == "stop" and "stop_reason" in answer and answer["stop_reason"] is None:
        return "eos"  # vLLM tells a stop string from eos; OpenAI does not
    return "stop" if reason in ("stop", "content_filter", "tool_calls", "function_call") else reason
