"""Request preparation shared by the model backends (transformers, vLLM, OpenAI).

* :class:`Renderer` makes the one choice of how a prompt is sent: the family's FIM prompt
  when the task asks for insertion, an instruction message for a chat API, else
  :func:`chat.render` (plain, ``--instruction_tokens`` or the tokenizer's chat template).
  The FIM format is resolved once per backend (a vocabulary lookup at most once).
* :func:`plan_jobs` turns a shard's requests into generation jobs for a local model:
  render once per (task_id, prompt), tokenise once per text, per-row budget, prompt too
  long, stop strings (+ the FIM end markers, de-duplicated) and one job for identical
  greedy requests.
* :func:`finish_raw` is the clean-up of a continuation: the FIM middle, or the pre-filled
  code block cut at its closing fence; :func:`to_output` turns decoded
  text into a GenOutput (a whole chat answer: the program from its first code block).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.generation.base import GenerationArgs, GenOutput, GenRequest
from codeeval.generation.prompts import chat, fim, thinking

Rendering = tuple[chat.Rendered, Optional[fim.FimFormat]]


class Renderer:
    """Renders prompts for one backend. ``tokenizer`` is None for an HTTP backend (the FIM
    format then comes from --fim_format or the model id); ``chat_template=False`` ignores
    --apply_chat_template (a completions endpoint has no template to apply);
    ``chat_api=True`` renders non-FIM prompts as the user message of a chat API (mode
    ``"messages"``: ``prefix + instruction``)."""

    def __init__(self, args: GenerationArgs, model: str, tokenizer: Any = None,
                 chat_template: bool = True, chat_api: bool = False):
        self.args = args if chat_template or not args.apply_chat_template else replace(args, apply_chat_template=False)
        self.model = model
        self.tokenizer = tokenizer
        self.chat_api = chat_api
        self._fim: Optional[fim.FimFormat] = None
        # the thinking's tag pairs to take off every answer (--reasoning strip), None: kept (keep)
        self.tags = thinking.tags_for(args)

    def fim_format(self) -> fim.FimFormat:
        """Resolved on the first FIM request (a model without FIM tokens fails only then)."""
        if self._fim is None:
            vocab = self.tokenizer.get_vocab() if self.tokenizer is not None and not self.args.fim_format else None
            self._fim = fim.get_format(self.args.fim_format, self.model, vocab)
        return self._fim

    def render(self, task: TaskSpec, problem: Optional[Problem], prompt: str) -> Rendering:
        parts = fim.fim_parts(task, problem) if problem is not None else None
        if parts is not None:
            fmt = self.fim_format()
            return chat.Rendered(fim.render(fmt, parts[0], parts[1], self.args.prefix), "fim"), fmt
        if self.chat_api:
            instruction, context = chat.instruction_parts(task, problem, prompt)
            return chat.Rendered(self.args.prefix + instruction, "messages", context=context), None
        return chat.render(prompt, self.args, task, problem, self.tokenizer), None


def request_stops(stop: Sequence[str], fmt: Optional[fim.FimFormat]) -> tuple[str, ...]:
    """The request's stop strings plus the FIM end markers, without repeats (order kept)."""
    return tuple(dict.fromkeys(tuple(stop) + (fmt.end if fmt is not None else ())))


def finish_raw(raw: str, mode: str, fmt: Optional[fim.FimFormat], eos: Optional[str]) -> str:
    """A FIM continuation cut to the middle; a chat/instruction one cut at the closing fence."""
    if fmt is not None:
        return fim.cut_middle(fmt, raw, eos)
    return chat.finish_continuation(raw, mode)


def to_output(text: str, n_tokens: int, finish_reason: str, *, mode: str, fmt: Optional[fim.FimFormat],
              eos: Optional[str], prompt: str, language: str, tags: Optional[thinking.Tags] = thinking.TAGS,
              reasoning: str = "", thinking_tokens: Optional[int] = None, opened: str = "") -> GenOutput:
    """Decoded text -> GenOutput. A reasoning model's thinking comes off first (`tags`; None keeps
    it in the text; `reasoning`: a server's field of its own for it; `opened`: the opening tag the
    prompt ended in): an answer whose thinking never closed is `thinking.UNFINISHED`, with no text.
    A whole chat answer (``--chat_style free``, or a chat API's) gives the continuation of the
    prompt found in its first code block (the benchmark's post-processing then applies) or else
    that block as a finished program; any other text is a continuation, cleaned by
    :func:`finish_raw`."""
    if tags is None and not reasoning:
        return _output(text, n_tokens, finish_reason, mode=mode, fmt=fmt, eos=eos, prompt=prompt, language=language)
    thought = thinking.joined(reasoning, opened + text, tags, cut=finish_reason == "length") if tags is not None \
        else thinking.Thought(text, reasoning)
    if thought.thinking is None:
        return _output(text, n_tokens, finish_reason, mode=mode, fmt=fmt, eos=eos, prompt=prompt, language=language)
    if thought.unfinished:
        return GenOutput("", n_tokens, thinking.UNFINISHED, None, thought.thinking, thinking_tokens)
    out = _output(thought.answer, n_tokens, finish_reason, mode=mode, fmt=fmt, eos=eos, prompt=prompt,
                  language=language)
    return replace(out, thinking=thought.thinking, thinking_tokens=thinking_tokens)


def _output(text: str, n_tokens: int, finish_reason: str, *, mode: str, fmt: Optional[fim.FimFormat],
            eos: Optional[str], prompt: str, language: str) -> GenOutput:
    if mode in ("answer", "messages"):
        if eos and eos in text:  # the answer ends at the eos text a local model kept
            text = text[:text.index(eos)]
        raw, program = chat.answer_to_output(prompt, text, language)
        return GenOutput(raw if raw is not None else text, n_tokens, finish_reason, program)
    return GenOutput(finish_raw(text, mode, fmt, eos), n_tokens, finish_reason)


@dataclass
class Job:
    """One generation job for a local model: a request, or several identical greedy ones."""

    ids: list[int]
    budget: int
    stops: tuple[str, ...]
    seed_key: tuple[str, int]  # (task_id, sample) of the first request
    requests: list[int] = field(default_factory=list)  # indices into the shard's requests
    mode: str = "plain"
    fim_fmt: Optional[fim.FimFormat] = None
    prompt: str = ""  # the benchmark's prompt (a free answer's code is matched against it)
    language: str = "python"
    tags: Optional[thinking.Tags] = thinking.TAGS  # Renderer.tags
    opened: str = ""  # the thinking's opening tag the rendered prompt ends in (thinking.opened)

    @property
    def watch(self) -> tuple[str, ...]:
        """Strings whose appearance in the newest text may end the row: the stop strings, or
        for a free answer the code fence (it ends once its first block closes)."""
        return (chat.FENCE,) if self.mode == "answer" else self.stops

    def output(self, text: str, n_tokens: int, finish_reason: str, eos: Optional[str]) -> GenOutput:
        return to_output(text, n_tokens, finish_reason, mode=self.mode, fmt=self.fim_fmt, eos=eos,
                         prompt=self.prompt, language=self.language, tags=self.tags, opened=self.opened)


def plan_jobs(task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest], renderer: Renderer,
              encode: Callable[[str, bool], list[int]], budget: Callable[[int], int],
              dedupe: bool) -> tuple[list[Job], list[Optional[GenOutput]]]:
    """(jobs, outputs): outputs holds a ``prompt_too_long`` GenOutput for each request that
    cannot run (its budget is <= 0, or its prompt is empty after tokenising: neither
    backend can decode from no tokens, and vLLM rejects an empty prompt) and None for the
    rest. With ``dedupe`` (greedy), requests with the same token ids, budget, stops and
    post-processing share one job. A free chat answer (mode ``answer``) gets no stop strings:
    the task's stop words apply to continuations, not to answers."""
    by_id = {p.task_id: p for p in problems}
    outputs: list[Optional[GenOutput]] = [None] * len(requests)
    jobs: list[Job] = []
    rendered_by_prompt: dict[tuple[str, str], Rendering] = {}
    encoded: dict[tuple[str, bool], list[int]] = {}
    shared: dict[tuple, Job] = {}
    for i, req in enumerate(requests):
        pkey = (req.task_id, req.prompt)
        if pkey not in rendered_by_prompt:
            rendered_by_prompt[pkey] = renderer.render(task, by_id.get(req.task_id), req.prompt)
        rendered, fmt = rendered_by_prompt[pkey]
        ekey = (rendered.text, rendered.add_special_tokens)
        if ekey not in encoded:
            encoded[ekey] = encode(rendered.text, rendered.add_special_tokens)
        ids = encoded[ekey]
        n_new = budget(len(ids))
        if n_new <= 0 or not ids:
            outputs[i] = GenOutput(raw="", n_tokens=0, finish_reason="prompt_too_long")
            continue
        stops = () if rendered.mode == "answer" else request_stops(req.stop, fmt)
        dkey = (ekey, rendered.mode, fmt, n_new, stops, req.prompt)
        if dedupe and dkey in shared:
            shared[dkey].requests.append(i)
            continue
        job = Job(ids=ids, budget=n_new, stops=stops, seed_key=(req.task_id, req.sample), requests=[i],
                  mode=rendered.mode, fim_fmt=fmt, prompt=req.prompt, language=chat.language_of(task),
                  tags=renderer.tags, opened=thinking.opened(rendered.text, renderer.tags))
        if dedupe:
            shared[dkey] = job
        jobs.append(job)
    return jobs, outputs
