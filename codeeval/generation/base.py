"""The generation backend interface.

A backend turns prompts into continuations. Benchmarks own prompts, stop words
and post-processing; backends only generate. `reference` and `replay` hand back
finished programs (GenOutput.program), which skip post-processing as bigcode's
--load_generations_path does.
"""
from __future__ import annotations

import abc
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core.progress import Progress


@dataclass(frozen=True)
class GenerationArgs:
    """bigcode main.py's generation flags, with its defaults."""

    do_sample: bool = True
    temperature: float = 0.2
    top_p: float = 0.95
    top_k: int = 0
    n_samples: int = 1
    batch_size: int = 1
    max_length_generation: int = 512  # prompt + completion tokens, bigcode's meaning
    max_new_tokens: Optional[int] = None  # the clearer budget; wins when given
    seed: int = 0
    prefix: str = ""
    precision: str = "fp32"
    trust_remote_code: bool = False
    revision: Optional[str] = None
    # added for the production backends (issue 4); defaults keep bigcode's behaviour
    instruction_tokens: Optional[str] = None  # "user,end,assistant" as bigcode's flag
    apply_chat_template: bool = False  # wrap prompts in the tokenizer's own chat template
    chat_style: str = "prefill"  # chat/instruction modes: prefill (fence + prompt) | free (first code block)
    device_map: Optional[str] = None  # e.g. "auto": one model across several devices
    max_batch_rows: int = 0  # rows per forward pass across prompts and samples; 0 = auto
    fim_format: Optional[str] = None  # FIM token family (starcoder, santacoder, codellama, ...)
    # a reasoning model's thinking (codeeval/generation/prompts/thinking.py): strip it before post-processing,
    # or keep it
    reasoning: str = "strip"
    thinking_tags: Optional[str] = None  # "open|close,..." instead of thinking.TAGS
    thinking_budget: Optional[int] = None  # tokens of thinking on top of the answer's budget (a server may cap it)
    enable_thinking: Optional[bool] = None  # the chat template's thinking switch; None: the template's default


def token_budget(args: GenerationArgs, n_prompt: int, context: Optional[int]) -> int:
    """New tokens a row may generate: --max_new_tokens, else bigcode's --max_length_generation
    minus the row's own prompt, plus --thinking_budget, capped by the model's context; <= 0 means
    no room."""
    budget = args.max_new_tokens if args.max_new_tokens is not None else args.max_length_generation - n_prompt
    budget += args.thinking_budget or 0
    return min(budget, context - n_prompt) if context else budget


@dataclass(frozen=True)
class GenRequest:
    task_id: str
    sample: int
    prompt: str  # the benchmark's prompt; backends prepend GenerationArgs.prefix themselves
    stop: tuple[str, ...]


@dataclass
class GenOutput:
    raw: str  # the continuation only (text after the prompt)
    n_tokens: int
    finish_reason: str  # stop | eos | length | prompt_too_long | reference | replay | unfinished_thinking
    program: Optional[str] = None  # set when the backend returns a finished program
    thinking: Optional[str] = None  # a reasoning model's thinking, taken off the answer (None: none seen)
    thinking_tokens: Optional[int] = None  # its tokens, where the server or the tokenizer tells


@dataclass
class CallContext:
    """What the shard lends a backend beside its requests. A backend behind a paid API journals its
    answered requests under the storage root `journal` (None: no journal), says each timeout and retry
    in one line through `say` (the shard's log, so the terminal too) and puts what the call cost in
    `usage` (requests sent and answered from the journal, tokens, seconds). A backend on local weights
    puts its device's time in `compute`: seconds building (compiling, capturing) and running its decode
    steps, and the compile store's entries found and missed (codeeval/pipeline/usage.py)."""

    journal: Optional[Path] = None
    say: Callable[[str], None] = field(default=logging.getLogger("codeeval.generation").warning)
    usage: dict = field(default_factory=dict)
    compute: dict = field(default_factory=dict)


class Backend(abc.ABC):
    name: str = "abstract"

    def fingerprint(self) -> str:
        """Identifies the model (and weights) for cache keys."""
        return self.name

    def eos_text(self) -> Optional[str]:
        """bigcode appends the tokenizer's eos text to every task's stop words."""
        return None

    @classmethod
    def counts(cls, spec, task: TaskSpec, problems: Sequence[Problem]) -> dict[str, int]:
        """Samples per problem (task_id -> n), known before any model loads; called once
        per task with every problem (`spec` is the BackendSpec)."""
        return {p.task_id: spec.args.n_samples for p in problems}

    @classmethod
    def input_fingerprint(cls, spec, task: TaskSpec) -> str:
        """What, besides the spec, the backend's output depends on (the model's files)."""
        from codeeval.core.fingerprint import model_fingerprint

        return model_fingerprint(spec.model, spec.args.revision)

    @abc.abstractmethod
    def generate(self, task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest],
                 progress: Progress = None, context: Optional[CallContext] = None) -> list[GenOutput]:
        """One GenOutput per request, in request order. `problems` holds every problem of
        the task in the run (a lookup table); `requests` are this shard's."""

    def close(self) -> None:
        pass
