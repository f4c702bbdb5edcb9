"""Prompts for instruction and chat models, and getting code back out of their answers.

Three prompt modes (bigcode's ``TokenizedDataset`` has the first two):

* plain: ``prefix + prompt``.
* ``--instruction_tokens user,end,assistant``:
  ``prefix + user + instruction + end + assistant + context``.
* ``--apply_chat_template``: the tokenizer's own template renders one user turn holding the
  instruction, with the generation prompt, then the context is appended as the start of
  the assistant's answer (a pre-filled response).

A task may supply ``TaskSpec.prompting.instruction = callable(problem) -> (instruction,
context)`` (bigcode's ``{"instruction", "context"}`` prompts). For a plain completion
task the default asks for the code and pre-fills the answer with an opening code fence
and the prompt itself, so the model *continues the prompt* and the continuation is still
"the text after the prompt": the benchmark's own post-processing (``prompt +
cut_at_first_stop(raw)``) works unchanged. The continuation is cut at the closing fence.

``--chat_style free`` pre-fills nothing (mode ``answer``): the model writes its whole
answer, which ends once its first code block closes, and :func:`answer_to_output` recovers
the program from that block, as for chat endpoints that cannot pre-fill (OpenAI
``/chat/completions``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

FENCE = "```"
CHAT_STYLES = ("prefill", "free")

DEFAULT_INSTRUCTION = (
    "Complete the following {language} code. Answer with the complete code in a single "
    "```{fence_lang} code block.\n```{fence_lang}\n{prompt}\n```"
)


@dataclass(frozen=True)
class Rendered:
    text: str  # what is sent to the model
    mode: str  # plain | instruction | chat | answer (free) | fim | messages (a chat API's user message)
    add_special_tokens: bool = True  # False when a chat template already wrote BOS etc.
    context: str = ""  # the pre-filled start of the answer (chat and instruction modes)


def parse_instruction_tokens(value) -> Optional[tuple[str, str, str]]:
    """bigcode's flag: ``"user,end,assistant"`` (escape sequences such as \\n allowed)."""
    if not value:
        return None
    if isinstance(value, (tuple, list)):
        parts = list(value)
    else:
        parts = value.split(",")
    if len(parts) != 3:
        raise ValueError("--instruction_tokens takes three comma-separated tokens: user,end,assistant")
    return tuple(p.encode("utf-8").decode("unicode_escape") if "\\" in p else p for p in parts)


def language_of(task) -> str:
    return task.prompting.language if task is not None else "python"


def instruction_parts(task, problem, prompt: str) -> tuple[str, str]:
    """(instruction, context) for instruction and chat modes."""
    fn = task.prompting.instruction if task is not None else None
    if fn is not None:
        return fn(problem)
    lang = language_of(task)
    fence_lang = lang.lower()
    instruction = DEFAULT_INSTRUCTION.format(language=lang.capitalize() if lang.islower() else lang,
                                             fence_lang=fence_lang, prompt=prompt.rstrip("\n"))
    context = f"{FENCE}{fence_lang}\n{prompt}"
    return instruction, context


def render(prompt: str, args, task=None, problem=None, tokenizer: Any = None) -> Rendered:
    """The text to send for one request's prompt (FIM is handled by the backend)."""
    prefix = getattr(args, "prefix", "") or ""
    template = getattr(args, "apply_chat_template", False)
    tokens = None if template else parse_instruction_tokens(getattr(args, "instruction_tokens", None))
    if not template and not tokens:
        return Rendered(prefix + prompt, "plain")
    style = getattr(args, "chat_style", "prefill")
    if style not in CHAT_STYLES:
        raise ValueError(f"--chat_style must be one of {', '.join(CHAT_STYLES)}, not {style!r}")
    instruction, context = instruction_parts(task, problem, prompt)
    if style == "free":
        context = ""
    if template:
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError("--apply_chat_template: the tokenizer has no chat template")
        messages = [{"role": "user", "content": prefix + instruction}]
        switch = getattr(args, "enable_thinking", None)  # the template's thinking switch (Qwen3's), where given
        head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                             **({} if switch is None else {"enable_thinking": switch}))
        return Rendered(head + context, "answer" if style == "free" else "chat", add_special_tokens=False,
                        context=context)
    user, end, assistant = tokens
    return Rendered(prefix + user + instruction + end + assistant + context,
                    "answer" if style == "free" else "instruction", context=context)


def answer_complete(text: str) -> bool:
    """A free answer is complete once its first code block is closed."""
    return text.count(FENCE) >= 2


def finish_continuation(raw: str, mode: str) -> str:
    """In chat/instruction modes the pre-filled code block ends at the closing fence."""
    if mode in ("chat", "instruction"):
        i = raw.find(FENCE)
        if i != -1:
            return raw[:i]
    return raw


_BLOCK = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(text: str, language: str = "python") -> str:
    """The code in a model's answer: the first fenced block in the language (or the first
    block at all); the whole text when there is no fence."""
    blocks = _BLOCK.findall(text)
    if not blocks:
        return text
    lang = language.lower()
    for tag, body in blocks:
        if tag.lower() in (lang, {"python": "py"}.get(lang, lang)):
            return body
    return blocks[0][1]


def _import_lines(prompt: str) -> str:
    lines = [ln for ln in prompt.splitlines() if re.match(r"\s*(import|from)\s+\w", ln)]
    return "\n".join(lines) + ("\n" if lines else "")


def answer_to_output(prompt: str, answer: str, language: str = "python"):
    """A whole chat answer -> (raw continuation or None, finished program or None).

    If the answer's code repeats the prompt, the continuation is the code after it (so the
    benchmark's post-processing applies as usual). Otherwise the code is taken as a
    finished program, with the prompt's import lines put in front.
    """
    code = extract_code(answer, language)
    stripped = prompt.strip()
    if stripped and stripped in code:
        return code[code.index(stripped) + len(stripped):], None
    # the model may have rewritten the signature line only (e.g. without the docstring)
    return None, _import_lines(prompt) + code
