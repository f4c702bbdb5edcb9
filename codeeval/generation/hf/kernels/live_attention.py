"""Decode attention that reads each slot's own columns, not the whole static cache.

A slot cache is as long as the batch's longest prompt plus budget, and SDPA reads every column
of every slot at each step, the masked ones too. On an H100 that was 25% of a 16-slot step and
64% of the sampling workload's 99-slot step (bench/gpu.py), while HumanEval's first 16 prompts
use 61% of their 320 columns on average over 128 steps. FlexAttention takes a block mask instead:
for each slot, the blocks of ``BLOCK`` columns that hold its positions, from the slot's column
(``SlotCache.columns``) on the device, so that a captured step reads fewer blocks as rows end and
refills start short. The columns of its last block past its position are masked element by
element (an earlier occupant's keys may be there).

Compiled only (``decode_step.live_logits``): uncompiled, FlexAttention computes every score.
The decoder makes it a rung of its own, with the compiled SDPA step as the next.
"""
from __future__ import annotations

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

BLOCK = 64  # columns per block; the decoder rounds a cache's length to a multiple of it
# Inductor's Triton kernel takes BLOCK_M query rows and BLOCK_N columns at a time, and refuses a
# mask whose blocks they do not divide; its default BLOCK_M is 128 at most (H100, bf16: 128 x 64;
# at head size 64: 128 x 128, so BLOCK_N is set). One query per row: one query block either way,
# mostly idle rows; a smaller block (option live_query_block) sets BLOCK_M to it.
QUERY_BLOCK = 128


def blocks_read(columns: torch.Tensor) -> torch.Tensor:
    """The blocks each slot reads: those up to the one holding its column."""
    return columns // BLOCK + 1


def block_mask(columns: torch.Tensor, length, query_block: int = QUERY_BLOCK) -> BlockMask:
    """Slot s attends to columns [0, columns[s]]: the blocks up to the one holding its column,
    the rest of that block masked. ``length``: the cache's columns (a multiple of BLOCK)."""
    blocks = -(-length // BLOCK)
    count = blocks_read(columns).to(torch.int32)[:, None, None]  # (slots, heads: 1, query blocks: 1)
    order = torch.arange(blocks, device=columns.device, dtype=torch.int32).expand(columns.shape[0], 1, 1, blocks)

    def seen(b, h, q, kv):
        return kv <= columns[b]

    return BlockMask.from_kv_blocks(count, order, BLOCK_SIZE=(query_block, BLOCK), mask_mod=seen,
                                    seq_lengths=(1, length), compute_q_blocks=False)  # a backward pass's


def attention(module, query, key, value, mask: BlockMask, scaling=None, **kwargs) -> torch.Tensor:
    """(rows, 1, heads, dim), as transformers' attention functions return it. Plain attention
    only: a soft cap, a position bias or sinks have no FlexAttention form here, and refusing
    them fails the compile, so the decoder's next rung (the SDPA step) runs."""
    extra = sorted(k for k in ("softcap", "position_bias", "s_aux", "sinks") if kwargs.get(k) is not None)
    if extra or getattr(module, "sliding_window", None):
        raise NotImplementedError(f"live attention: {', '.join(extra) or 'a sliding window'}")
    grouped = query.shape[1] != key.shape[1]
    rows = mask.BLOCK_SIZE[0]
    kernel = {"BLOCK_N": BLOCK, **({"BLOCK_M": rows} if rows < QUERY_BLOCK else {})}
    out = flex_attention(query, key, value, block_mask=mask, scale=scaling, enable_gqa=grouped, kernel_options=kernel)
    return out.transpose(1, 2).contiguous()
