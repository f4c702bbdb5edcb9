"""Per-sample seeds: a sample's random stream depends on (seed, task_id, sample) only.

So a sampled completion is the same whatever the batch size, the number of devices or
the shard it lands in (bigcode seeds one global generator per process, so its samples
change with --batch_size and the number of GPUs).
"""
from __future__ import annotations

import hashlib


def sample_seed(seed: int, task_id: str, sample: int) -> int:
    """A 63-bit seed for one (task_id, sample) under the run's --seed."""
    digest = hashlib.sha256(f"codeeval\0{seed}\0{task_id}\0{sample}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


_MASK64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def uniform(row_seed: int, step: int) -> float:
    """A counter-based uniform in [0, 1) for token `step` of the row with `row_seed`: no
    generator state, so it cannot depend on which rows share a batch."""
    return (splitmix64(splitmix64(row_seed) ^ step) >> 11) * (1.0 / (1 << 53))
