"""The matrix products of a step with few rows written as reductions that Inductor generates,
instead of calls to the BLAS.

A decode step has one row per slot, so each of its matrix products reads a whole matrix to make a
few numbers per row: its time is the matrix's bytes. cuBLAS read the matrices of a
deepseek-coder-1.3b step at 2.55 TB/s on an H200, 53% of the bandwidth (bench/gpu.py), and each
call is a kernel of its own between Inductor's. Written as a product and a sum over the inner
dimension, a matrix product is one of Inductor's reduction kernels instead, with block sizes it
tunes to the shape, and one that it can fuse with the additions and conversions next to it.

Only for products whose row count is known when compiled and at most ``rows``: a reduction reads
the rows of the step together, with each weight once, but multiplies on the vector units, so past
a few rows the BLAS, which multiplies on the matrix units, is faster. The decoder compiles such
small steps for their exact slot count (``SlotState``'s ``exact_slots``), and a step of more slots
keeps the BLAS's products. The rows are made (realized) before the reduction that reads them:
inlined into its loads, the norm that makes them would be computed again for every matrix row.
"""
from __future__ import annotations

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files
from torch._inductor.pattern_matcher import Arg, CallFunction, Match, PatternMatcherPass, register_graph_pattern
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten


def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for a of few rows, accumulated in fp32: the weight b (K x N, the transpose of a
    Linear's N x K) is read along K, its rows' contiguous dimension. The result is laid out as
    ``mm``'s (rows x N, contiguous): a transposed one reached cuDNN's attention on an H100 as
    queries with a stride of 2 in their last dimension, which it refuses."""
    both = a.unsqueeze(1).float() * b.t().unsqueeze(0).float()  # rows x N x K
    return both.sum(-1)


def _mm(a, b):
    return product(a, b).to(a.dtype)


def _addmm(bias, a, b):
    return (product(a, b) + bias.float()).to(a.dtype)


def _linear_weight(b) -> bool:
    """b is a Linear's (N x K) weight seen transposed, so that a sum over K reads it contiguously;
    GPT-2's Conv1D holds its weight K x N, which a reduction over K would read across its rows."""
    return statically_known_true(b.stride(0) == 1) and statically_known_true(b.stride(1) == b.shape[0])


class ThinProducts(CustomGraphPass):
    """Inductor's post-grad pass that writes each ``mm`` and ``addmm`` of at most ``rows`` rows
    as :func:`product`."""

    def __init__(self, rows: int):
        self.rows = rows
        self.patterns = PatternMatcherPass(pass_name="codeeval_thin_products")
        for target, replacement, at in ((aten.mm.default, _mm, 0), (aten.addmm.default, _addmm, 1)):
            pattern = CallFunction(target, *(Arg() for _ in range(at + 2)))
            register_graph_pattern(pattern, extra_check=self._thin(at), pass_dict=self.patterns)(
                self._replacer(replacement, at))

    def _thin(self, at: int):
        def check(match: Match) -> bool:
            a, b = (n.meta.get("val") if isinstance(n, torch.fx.Node) else None for n in match.args[at:at + 2])
            return (a is not None and b is not None and a.dim() == 2 and b.dim() == 2 and a.dtype.is_floating_point
                    and statically_known_true(a.shape[0] <= self.rows) and _linear_weight(b))
        return check

    @staticmethod
    def _replacer(replacement, at: int):
        def replace(match: Match, *args) -> None:
            match.replace_by_example(replacement, list(args))
            args[at].meta["inductor_realize_to_strides"] = True  # the rows made once, not per matrix row
        return replace

    def __call__(self, graph: torch.fx.Graph) -> None:
        self.patterns.apply(graph)

    def uuid(self):
        return get_hash_for_files((__file__,)) + str(self.rows).encode()


def inductor_options(rows: int) -> dict:
    """What ``torch.compile(options=...)`` takes for thin products of at most ``rows`` rows: the
    pass, and Inductor's tuning of each kernel's block sizes by timing them (on a GPU)."""
    return {"post_grad_custom_post_pass": ThinProducts(rows), "coordinate_descent_tuning": True}
