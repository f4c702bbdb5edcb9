"""Prompt lookup: draft tokens for speculative decoding without a draft model, and the KV-cache
housekeeping that verifying drafts in a batch needs.

Code continuations copy a lot: identifiers and signatures from the prompt, and a small model's
greedy loops repeat themselves. The newest n-gram of a row's tokens (prompt + continuation),
found earlier in them, proposes the tokens that followed it there. The decoder scores them all
in one forward pass and keeps only those that equal its own choices, so drafts change speed,
never output.
"""
from __future__ import annotations

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view


def propose(context: list[int], max_tokens: int, max_ngram: int = 3, min_ngram: int = 2) -> list[int]:
    """Up to ``max_tokens`` tokens that followed the latest earlier occurrence of the context's
    last n-gram (longest n first), repeated as a cycle when they run out; [] when there is none."""
    if max_tokens <= 0:
        return []
    arr = np.asarray(context)
    for g in range(max_ngram, min_ngram - 1, -1):
        if len(arr) <= g:
            continue
        hits = np.flatnonzero((sliding_window_view(arr[:-1], g) == arr[-g:]).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + g
            # what followed runs up to the end: the row repeats a cycle, so the draft continues it
            cycle = arr[start:]
            return np.resize(cycle, max_tokens).tolist()
    return []


def accepted(draft: list[int], chosen: list[int]) -> int:
    """How many draft tokens equal the tokens chosen after the position before each of them."""
    a = 0
    while a < len(draft) and draft[a] == chosen[a]:
        a += 1
    return a


def compact(cache, mask: torch.Tensor) -> torch.Tensor:
    """Squeeze the masked-out columns (left padding of rows that left, rejected drafts) out of a
    DynamicCache: each row's kept columns, in order, right-aligned. Returns the new mask; the
    rows' explicit position ids make the columns' places irrelevant."""
    keep = mask.bool()
    width = int(keep.sum(dim=1).max())
    idx = torch.argsort(keep.to(torch.int8), dim=1, stable=True)[:, -width:]  # masked first, kept last
    for layer in cache.layers:
        keys = layer.keys
        g = idx[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
        layer.keys = keys.gather(2, g)
        layer.values = layer.values.gather(2, g)
    return mask.gather(1, idx)
