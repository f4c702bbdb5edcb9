"""Choosing the next token from logits: argmax, or transformers' warpers and a seeded draw.

One function serves plain steps and speculative verification alike: each row of ``logits`` is
one (sample, step) with its own counter-based uniform (codeeval/generation/prompts/seeds.py), so a token
depends only on its own logits and uniform, never on the other rows scored with it. The uniforms
come from the host (a list) or, on the GPU path, from :func:`uniforms` on the device: the same
splitmix64 in int64 arithmetic, bit for bit, so no step waits for the host to draw them.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

_GOLDEN, _MIX1, _MIX2 = (c - (1 << 64) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shr(x: torch.Tensor, n: int) -> torch.Tensor:
    """Logical right shift of int64 (torch's ``>>`` keeps the sign)."""
    return (x >> n) & ((1 << (64 - n)) - 1)


def splitmix64(x: torch.Tensor) -> torch.Tensor:
    """seeds.splitmix64 on an int64 tensor: its adds and products wrap modulo 2**64 as the
    unsigned ones do, so the bits are the same."""
    x = x + _GOLDEN
    x = (x ^ _shr(x, 30)) * _MIX1
    x = (x ^ _shr(x, 27)) * _MIX2
    return x ^ _shr(x, 31)


def uniforms(row_seeds: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """seeds.uniform(row_seed, step) for each row, as float64 on the tensors' device."""
    return _shr(splitmix64(splitmix64(row_seeds) ^ steps), 11).double() * (1.0 / (1 << 53))


def choose(logits: torch.Tensor, args, draws: Optional[Union[Sequence[float], torch.Tensor]]) -> torch.Tensor:
    """The token of each row of ``logits`` (rows, vocab): argmax without ``args.do_sample``,
    else temperature -> top_k -> top_p (transformers' order) and an inverse-CDF draw."""
    if not args.do_sample:
        return logits.argmax(dim=-1)
    logits = logits.float()
    if args.temperature and args.temperature != 1.0:
        logits = logits / args.temperature
    if args.top_k and args.top_k > 0:
        k = min(args.top_k, logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if args.top_p is not None and args.top_p < 1.0:
        # transformers' TopPLogitsWarper: drop the tokens whose cumulative probability
        # (ascending) stays within 1 - top_p, always keeping the most likely one
        sorted_logits, sorted_idx = torch.sort(logits, descending=False, dim=-1)
        cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove = cum <= (1 - args.top_p)
        remove[..., -1:] = False
        logits = logits.masked_fill(remove.scatter(1, sorted_idx, remove), float("-inf"))
    # inverse-CDF sampling with one counter-based uniform per row (exact, and the draw
    # of a row never depends on the other rows of the batch)
    cum = logits.softmax(dim=-1).double().cumsum(dim=-1)
    u = torch.as_tensor(draws, dtype=cum.dtype, device=cum.device)[:, None] * cum[:, -1:]
    idx = torch.searchsorted(cum, u, right=True).squeeze(1)
    return idx.clamp_(max=logits.shape[-1] - 1)
