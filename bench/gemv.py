"""A Triton matrix-vector product for a decode step's few rows, timed by bench/gpu.py beside cuBLAS's.

Not used by codeeval: a measurement. At batch 1 a step is its matrix products, and cuBLAS read a
deepseek-coder-1.3b step's matrices at 2.04 TB/s (2.55 fused) on an H200 of 4.8 TB/s. This asks how
near the bandwidth a plain kernel gets for the same shapes: y = x @ W.T, x (M, K) with M <= 16
rows, W (N, K) row-major. Each program owns BLOCK_N rows of W and streams them once along K; the
rows of x are padded to 16 for the tensor cores. Triton picks each shape's tiles by timing them.
`TRITON_INTERPRET=1` runs it on a CPU (correctness only).
"""
from __future__ import annotations

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU machines: bench/gpu.py says it was not measured
    triton = None


if triton is not None:
    _CONFIGS = [triton.Config({"BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
                for n, k, w, s in ((16, 512, 4, 3), (32, 256, 4, 4), (64, 128, 4, 4), (64, 256, 8, 3))]

    @triton.jit
    def _gemv_tile(x_ptr, w_ptr, y_ptr, M, N, K: tl.constexpr,  # K: a loop bound known when compiling
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid = tl.program_id(0)
        rows = tl.arange(0, BLOCK_M)
        cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K),
                        other=0.0)
            w = tl.load(w_ptr + cols[:, None] * K + ks[None, :], mask=(cols[:, None] < N) & (ks[None, :] < K),
                        other=0.0)
            acc += tl.dot(x, tl.trans(w))
        tl.store(y_ptr + rows[:, None] * N + cols[None, :], acc.to(y_ptr.dtype.element_ty),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))

    _gemv = triton.autotune(configs=_CONFIGS, key=["M", "N", "K"])(_gemv_tile)


def gemv(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x @ w.T for x (M <= 16, K) and w (N, K), both contiguous."""
    m, k = x.shape
    n = w.shape[0]
    y = torch.empty((m, n), device=x.device, dtype=x.dtype)
    if x.device.type == "cpu":  # TRITON_INTERPRET=1: one tile shape, nothing to time
        _gemv_tile[(triton.cdiv(n, 32),)](x, w, y, m, n, k, BLOCK_M=16, BLOCK_N=32, BLOCK_K=128)
    else:
        _gemv[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)](x, w, y, m, n, k, BLOCK_M=16)
    return y
