"""Decode attention of a grouped-query model without a copy of the cache per query head.

In a grouped-query model (Qwen2.5-Coder, StarCoder2, SmolLM2: several query heads share each key
and value head) transformers' SDPA attention, with a mask and under torch.compile, first copies
every key and value head once per query head that reads it (``repeat_kv``). In a decode step
the mask is the slots' and the step is compiled, so each layer wrote and read a copy of its
cache as many times larger as there are query heads per key head. For one new token per row
transformers itself avoids that when not compiling (``pack_gqa``): a key head's queries become
the query positions of one attention over that head. This does the same when compiling, with
the same SDPA call; everything else (prefill, masks of other shapes) is transformers' own.
A block mask (the decoder's live attention) goes to codeeval/generation/hf/kernels/live_attention.py.
"""
from __future__ import annotations

import logging

import torch.nn.functional as F

log = logging.getLogger(__name__)
NAME = "codeeval_sdpa"


def install(model) -> bool:
    """Route the model's attention through :func:`attention` (SDPA models only); whether it is."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    impl = getattr(model.config, "_attn_implementation", None)
    if impl == NAME:
        return True
    if impl != "sdpa":
        return False
    AttentionInterface.register(NAME, attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)  # the masks SDPA takes, made as for sdpa
    try:
        model.set_attn_implementation(NAME)
    except (ValueError, TypeError, NotImplementedError) as exc:  # a model that takes no registered attention
        log.info("grouped attention: %s keeps sdpa (%s)", type(model).__name__, exc)
        return False
    return model.config._attn_implementation == NAME


def attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers' SDPA attention; for one query per row of a grouped model, without repeat_kv."""
    from torch.nn.attention.flex_attention import BlockMask
    from transformers.integrations.sdpa_attention import pack_gqa, sdpa_attention_forward

    if isinstance(attention_mask, BlockMask):
        from codeeval.generation.hf.kernels import live_attention

        return live_attention.attention(module, query, key, value, attention_mask, scaling, **kwargs), None

    groups = getattr(module, "num_key_value_groups", 1)
    shared_mask = attention_mask is None or attention_mask.shape[1] == 1
    plain = kwargs.get("position_bias") is None and kwargs.get("softcap") is None
    if query.shape[2] != 1 or groups == 1 or not shared_mask or not plain:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    rows, heads = query.shape[:2]
    packed = pack_gqa(query, groups)  # transformers' own packing: query head h reads key head h // groups
    out = F.scaled_dot_product_attention(packed, key, value, attn_mask=attention_mask, dropout_p=dropout,
                                         scale=scaling)
    return out.reshape(rows, heads, 1, value.shape[-1]).transpose(1, 2).contiguous(), None
