"""One forward pass over the distinct prompts of a batch, and the model call both decoders make.

Prompts are left-padded with an attention mask and explicit position ids, so padding never
changes a row's result. The KV cache goes in and out under the argument the model's forward
names: ``cache`` since transformers 5.24 (``past_key_values`` there warns that it will be
removed in 5.40), ``past_key_values`` for a model whose remote code predates it.
"""
from __future__ import annotations

import inspect
from typing import Optional

import torch


def cache_argument(model) -> str:
    """``cache`` where the model's forward takes it, else ``past_key_values``."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def forward(model, cache_arg: str, input_ids, mask, positions, cache, logits_to_keep: Optional[int] = None):
    """(logits, cache) of one forward pass; ``logits_to_keep`` where the model takes it."""
    kwargs = dict(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True)
    kwargs[cache_arg] = cache
    out = None
    if logits_to_keep is not None:
        try:
            out = model(**kwargs, logits_to_keep=logits_to_keep)
        except TypeError:  # older or remote-code models
            out = None
    if out is None:
        out = model(**kwargs)
    return out.logits, (out.cache if cache_arg == "cache" else out.past_key_values)


def left_padded(prompts: list[tuple[int, ...]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, mask, positions) of prompts left-padded to the longest."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for j, p in enumerate(prompts):
        ids[j, width - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[j, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def prefill(model, cache_arg: str, prompts: list[tuple[int, ...]], pad_id: int, device):
    """(cache, last logits, mask, next positions) of one forward over ``prompts``."""
    ids, mask, positions = left_padded(prompts, pad_id, device)
    logits, cache = forward(model, cache_arg, ids, mask, positions, None, logits_to_keep=1)
    return cache, logits[:, -1, :], mask, positions[:, -1:] + 1
