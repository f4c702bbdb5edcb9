"""Fill-in-the-middle prompts, with the token format configurable per model family.

A benchmark that needs insertion (DS-1000 insertion mode) sets
``TaskSpec.prompting.fim_parts = callable(problem) -> (prefix, suffix)``. The backends then
build the family's FIM prompt instead of ``prefix + prompt`` and hand back the middle as
``GenOutput.raw`` (cut at the family's end-of-middle marker), as bigcode's ``_parse_infill``
does for InCoder, SantaCoder and StarCoder.

``--fim_format`` names a family below, or gives three or four comma-separated tokens
``prefix_token,suffix_token,middle_token[,end_token]`` (prefix-suffix-middle order).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class FimFormat:
    name: str
    template: str  # with {pre} and {suf}; bigcode puts --prefix in front of the code prefix
    end: tuple[str, ...] = ()  # markers that end the middle (besides the eos text)


FORMATS: dict[str, FimFormat] = {
    "starcoder": FimFormat("starcoder", "<fim_prefix>{pre}<fim_suffix>{suf}<fim_middle>",
                           ("<|endoftext|>", "<file_sep>")),
    "santacoder": FimFormat("santacoder", "<fim-prefix>{pre}<fim-suffix>{suf}<fim-middle>",
                            ("<|endoftext|>",)),
    "incoder": FimFormat("incoder", "{pre}<|mask:0|>{suf}<|mask:0|>", ("<|endofmask|>",)),
    "codellama": FimFormat("codellama", "<PRE> {pre} <SUF>{suf} <MID>", ("<EOT>",)),
    "deepseek": FimFormat("deepseek", "<｜fim▁begin｜>{pre}<｜fim▁hole｜>{suf}<｜fim▁end｜>",
                          ("<|EOT|>",)),
    "qwen": FimFormat("qwen", "<|fim_prefix|>{pre}<|fim_suffix|>{suf}<|fim_middle|>",
                      ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>")),
    "codegemma": FimFormat("codegemma", "<|fim_prefix|>{pre}<|fim_suffix|>{suf}<|fim_middle|>",
                           ("<|file_separator|>",)),
}
# bigcode decides by model id; these are the ids it knows, plus the families above.
_BY_MODEL = {
    "facebook/incoder-1b": "incoder", "facebook/incoder-6b": "incoder",
    "bigcode/santacoder": "santacoder",
    "bigcode/starcoder": "starcoder", "bigcode/starcoderbase": "starcoder",
}
# marker token -> family, for guessing from a tokenizer's vocabulary
_MARKERS = [("<fim_prefix>", "starcoder"), ("<fim-prefix>", "santacoder"),
            ("<|fim_prefix|>", "qwen"), ("<｜fim▁begin｜>", "deepseek"), ("<PRE>", "codellama"),
            ("<|mask:0|>", "incoder")]


def get_format(spec: Optional[str], model: str = "", vocab: Any = None) -> FimFormat:
    """The FIM format named by --fim_format, else guessed from the model id or vocabulary."""
    if spec:
        if spec in FORMATS:
            return FORMATS[spec]
        parts = spec.split(",")
        if len(parts) in (3, 4):
            pre, suf, mid = parts[:3]
            return FimFormat("custom", pre + "{pre}" + suf + "{suf}" + mid,
                             (parts[3],) if len(parts) == 4 and parts[3] else ())
        raise ValueError(f"unknown FIM format {spec!r}: use one of {sorted(FORMATS)} "
                         "or 'prefix_tok,suffix_tok,middle_tok[,end_tok]'")
    key = model.lower().rstrip("/")
    if key in _BY_MODEL:
        return FORMATS[_BY_MODEL[key]]
    if vocab is not None:
        for marker, family in _MARKERS:
            if marker in vocab:
                return FORMATS[family]
    raise ValueError(f"fill-in-the-middle is not configured for {model!r}: pass --fim_format")


def fim_parts(task, problem) -> Optional[tuple[str, str]]:
    """(prefix, suffix) when the task asks for insertion, else None."""
    fn = task.prompting.fim_parts if task is not None else None
    return fn(problem) if fn else None


def render(fmt: FimFormat, prefix: str, suffix: str, preprefix: str = "") -> str:
    return fmt.template.format(pre=preprefix + prefix, suf=suffix)


def cut_middle(fmt: FimFormat, text: str, eos: Optional[str] = None) -> str:
    """The infilled middle: the continuation up to the first end marker."""
    ends = list(fmt.end) + ([eos] if eos else [])
    cut = len(text)
    for end in ends:
        i = text.find(end)
        if i != -1:
            cut = min(cut, i)
    return text[:cut]
