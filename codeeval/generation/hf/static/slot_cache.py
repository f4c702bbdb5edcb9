"""A static KV cache of S slots x L columns in which every slot keeps its own length.

Column c of a slot holds the token at position c of the row in it: a prompt's keys and values
are copied in at columns [0, P) from its prefill, and each decode step writes every slot at its
own column (its position). So rows of different lengths share one static shape with no padding,
a slot is refilled without touching the others, and the attention mask of a slot is simply its
columns up to its position (whatever an earlier occupant left beyond it is masked out). Fixed
shapes and fixed addresses are what lets a CUDA graph replay the step (codeeval/generation/hf/static/decode_step.py).

It is transformers' StaticCache machinery (its ``Cache`` and ``StaticLayer``) with one change:
a StaticLayer writes every row at one shared column, a slot layer at the row's own.
"""
from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer, StaticLayer


def supported(prefill_cache) -> bool:
    """Only plain full-attention layers (no sliding window, linear attention or quantized
    layers): their keys are (rows, heads, positions, head_dim) and a mask over columns is all."""
    layers = getattr(prefill_cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer and layer.keys is not None for layer in layers)


class SlotLayer(StaticLayer):
    def __init__(self, keys: torch.Tensor, values: torch.Tensor, columns: torch.Tensor):
        super().__init__(max_cache_len=keys.shape[2])
        self.keys, self.values, self.columns = keys, values, columns
        self.device = keys.device
        self.batch_size, self.num_heads = keys.shape[:2]
        self.k_head_dim, self.v_head_dim = keys.shape[3], values.shape[3]
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        """One new position per slot, written at the slot's column; all columns returned.

        An ``index_put_``, not a ``scatter_``: Inductor writes an index_put into the cache in
        place, but a scatter into a new cache-sized buffer that it then copies back, which
        reads and writes the whole cache twice per layer and step."""
        slots, heads = key_states.shape[:2]
        at = (torch.arange(slots, device=self.device)[:, None], torch.arange(heads, device=self.device)[None, :],
              self.columns[:, None])
        self.keys.index_put_(at, key_states[:, :, 0])
        self.values.index_put_(at, value_states[:, :, 0])
        return self.keys, self.values


class SlotCache(Cache):
    """``columns`` (slots,) is each slot's position: where its next token is written, and the
    last column its attention sees."""

    def __init__(self, like, slots: int, length: int):
        first = like.layers[0].keys
        self.length = length
        self.columns = torch.zeros(slots, dtype=torch.long, device=first.device)
        self._cols = torch.arange(length, device=first.device)
        layers = []
        for layer in like.layers:
            k, v = layer.keys, layer.values
            layers.append(SlotLayer(k.new_zeros((slots, k.shape[1], length, k.shape[3])),
                                    v.new_zeros((slots, v.shape[1], length, v.shape[3])), self.columns))
        super().__init__(layers=layers)
        self.dtype = first.dtype

    @property
    def slots(self) -> int:
        return self.columns.shape[0]

    def attention_mask(self) -> torch.Tensor:
        """(slots, 1, 1, L) additive mask: 0 on each slot's columns up to its position."""
        seen = self._cols[None, :] <= self.columns[:, None]
        blocked = torch.finfo(self.dtype).min
        return torch.where(seen, 0.0, blocked).to(self.dtype)[:, None, None, :]

    def load(self, slots: torch.Tensor, prefill_cache, row: int, start: int, length: int) -> None:
        """Prompt ``row`` of a prefill cache (its columns [start, start + length), left padding
        before them) into columns [0, length) of each slot in ``slots``."""
        for mine, theirs in zip(self.layers, prefill_cache.layers):
            mine.keys[slots, :, :length] = theirs.keys[row, :, start:start + length]
            mine.values[slots, :, :length] = theirs.values[row, :, start:start + length]
