"""Data-parallel generation over devices, without `accelerate launch`.

The flow asks :func:`plan` for one BackendSpec per device (transformers; vLLM uses one
engine with ``tensor_parallel_size``) and runs one Prefect task per device shard (each
task opens its own backend on its device); :func:`split` deals the requests or problems
out so shards get similar work. Outputs do not depend on the split:
greedy decoding is per row, and sampling seeds are per (task_id, sample).

A CLI run under ``accelerate launch`` / ``torchrun`` still works: :func:`launcher_rank`
reads RANK / WORLD_SIZE / LOCAL_RANK, the rank generates ``split(items, world)[rank]``
on ``cuda:LOCAL_RANK`` and rank 0 gathers the shard files.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Optional, Sequence, TypeVar

T = TypeVar("T")


def visible_devices() -> list[str]:
    try:
        import torch
    except ImportError:
        return []
    if torch.cuda.is_available():
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return []


def plan(spec, max_shards: Optional[int] = None, devices: Optional[Sequence[str]] = None) -> list:
    """One BackendSpec per device for data-parallel generation (transformers only).

    Leaves the spec alone (a one-element list) when it already names a device, uses
    device_map (one model over several devices), is not the transformers backend, or when
    at most one device is visible. vLLM is always one spec: the shards run as threads of one
    process and vLLM picks its GPUs per process (CUDA_VISIBLE_DEVICES at engine start), so
    per-device engines would all land on one GPU; several GPUs serve one vLLM engine through
    its ``tensor_parallel_size`` option instead.
    """
    if spec.kind != "transformers" or spec.device or spec.args.device_map:
        return [spec]
    devs = list(devices) if devices is not None else visible_devices()
    if max_shards:
        devs = devs[:max_shards]
    if len(devs) <= 1:
        return [replace(spec, device=devs[0])] if devs else [spec]
    return [replace(spec, device=d) for d in devs]


def split(items: Sequence[T], n: int, key=None) -> list[list[T]]:
    """Deal items into n shards round-robin after sorting by `key` (e.g. prompt length),
    so every shard gets a similar mix of long and short prompts. Order within a shard
    follows the input order."""
    n = max(1, n)
    order = sorted(range(len(items)), key=(lambda i: key(items[i])) if key else None) if key else range(len(items))
    buckets: list[list[int]] = [[] for _ in range(n)]
    for k, i in enumerate(order):
        buckets[k % n].append(i)
    return [[items[i] for i in sorted(b)] for b in buckets]


def launcher_rank() -> tuple[int, int, Optional[str]]:
    """(rank, world_size, device) under accelerate launch / torchrun; (0, 1, None) otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
    local = os.environ.get("LOCAL_RANK")
    device = f"cuda:{local}" if local is not None and visible_devices() else None
    return rank, world, device
