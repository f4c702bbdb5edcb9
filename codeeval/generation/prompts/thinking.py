"""A reasoning model's thinking, told apart from its answer before any post-processing.

Why here, once, for every backend: a model that thinks (DeepSeek-R1 and its distillations, Qwen3,
gpt-oss, ...) writes `<think>...</think>` before its answer through a local backend, and a server
with a reasoning parser (vLLM, SGLang) returns the thinking in a field of its own. Left in, the
thinking's code blocks and prose are taken for the answer; cut by a budget, nothing executable is
left and the sample would be scored as an empty completion without a word.

`split` takes the thinking off the front of a text. A text with no tag is returned unchanged, so
a model that does not think gets bigcode's numbers (docs/deviations.md). Templates that put the
opening tag into the prompt (Qwen3, R1) leave only the closing one in the text: what comes before
it is thinking. A thinking that never closed leaves no answer: `UNFINISHED`, a failure of its own
(its empty completion fails under that status in the execute stage; results.json counts it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

MODES = ("strip", "keep")
UNFINISHED = "unfinished_thinking"  # the finish reason of an answer whose thinking never closed
Tags = tuple[tuple[str, str], ...]
# (open, close) pairs seen in reasoning models' outputs; --thinking_tags replaces them
TAGS: Tags = (
    ("<think>", "</think>"),  # DeepSeek-R1, QwQ, Qwen3, and most distillations
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("◁think▷", "◁/think▷"),  # Kimi
    ("<|channel|>analysis<|message|>", "<|end|>"),  # gpt-oss's harmony format, as a raw decode shows it
)


@dataclass(frozen=True)
class Thought:
    answer: str  # the text after the thinking (the whole text when there was none)
    thinking: Optional[str]  # None: the text held no thinking
    unfinished: bool = False  # an opening tag with no closing one: no answer at all


def tags_for(args) -> Optional[Tags]:
    """The tag pairs to take off a run's answers (GenerationArgs' --reasoning, --thinking_tags);
    None with --reasoning keep."""
    return parse_tags(args.thinking_tags) if args.reasoning == "strip" else None


def parse_tags(spec: Optional[str]) -> Tags:
    """--thinking_tags 'open|close,open|close' -> pairs; None or '' -> TAGS. ValueError on a pair
    without both halves."""
    if not spec:
        return TAGS
    pairs = []
    for part in spec.split(","):
        opening, bar, closing = part.partition("|")
        if not bar or not opening.strip() or not closing.strip():
            raise ValueError(f"--thinking_tags: {part!r} is not 'open|close' (e.g. '<think>|</think>')")
        pairs.append((opening.strip(), closing.strip()))
    return tuple(pairs)


def opened(prompt: str, tags: Optional[Tags]) -> str:
    """The opening tag a rendered prompt ends in (a chat template that starts the thinking for the
    model, as Qwen3's and R1's do), else '': the continuation is then thinking until it closes."""
    tail = prompt.rstrip()
    return next((opening for opening, _ in tags or () if tail.endswith(opening)), "")


def split(text: str, tags: Tags = TAGS) -> Thought:
    """The thinking at the front of `text` and the answer after it (see the module's docstring)."""
    head = text.lstrip()
    for opening, closing in tags:
        if head.startswith(opening):
            body = head[len(opening):]
            if closing not in body:
                return Thought("", body, unfinished=True)
            thinking, _, answer = body.partition(closing)
            return Thought(answer.lstrip("\n"), thinking)
    for opening, closing in tags:
        if closing in text and opening not in text[:text.index(closing)]:
            thinking, _, answer = text.partition(closing)
            return Thought(answer.lstrip("\n"), thinking)
    return Thought(text, None)


def joined(reasoning: str, text: str, tags: Tags = TAGS, cut: bool = False) -> Thought:
    """`split`, for a server that may return the thinking in a field of its own (`reasoning_content`,
    `reasoning`: vLLM's and SGLang's reasoning parsers): the content is the answer (split as well,
    where tags came through). A thinking cut by the budget (`cut`) comes back as reasoning with no
    content: unfinished."""
    inner = split(text, tags)
    if not reasoning:
        return inner
    thinking = "\n".join(p for p in (reasoning, inner.thinking) if p)
    return Thought(inner.answer, thinking, inner.unfinished or (cut and not inner.answer.strip()))
