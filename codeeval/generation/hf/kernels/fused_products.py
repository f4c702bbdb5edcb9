"""Each layer's q/k/v matrices, and its gate/up matrices, held as one matrix, so that a compiled
forward makes one matrix product per group instead of three or two.

At one new token per row a decode step is a chain of matrix-vector products, each reading its
matrix once, and the BLAS reads one large matrix faster than several small ones: on an H200, the
products of a deepseek-coder-1.3b step took 1.29 ms as the model has them and 1.03 ms fused
(2.04 against 2.55 TB/s; bench/gpu.py, docs/generation.md "On a GPU").

The group's matrix is one tensor and each member's weight a view of its rows: no memory is
doubled, and ``parameters()``, ``state_dict()``, the eager forward and its numbers are as before.
Only while torch.compile traces does a member compute its whole group's product and keep its
rows; :class:`SameProducts`, a pass that ``decode_step.compiled`` gives Inductor (which merges no
identical products in an inference graph by itself), then makes the members' products one. So a
member fed another input than its siblings is still right, only not faster.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # transformers' names


class FusedMember(nn.Linear):
    """An ``nn.Linear`` whose weight is rows [lo, hi) of its group's matrix (``group_weight``)."""

    group_weight: torch.Tensor
    group_bias: "torch.Tensor | None"
    lo: int
    hi: int

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return F.linear(x, self.group_weight, self.group_bias)[..., self.lo:self.hi]
        return F.linear(x, self.weight, self.bias)


def fuse(model: nn.Module) -> int:
    """Fuse every group of sibling ``nn.Linear`` modules named in GROUPS, in place; how many."""
    fused = 0
    for parent in list(model.modules()):
        for names in GROUPS:
            members = [getattr(parent, name, None) for name in names]
            if _fusable(members):
                _fuse(members)
                fused += 1
    return fused


def _fusable(members: list) -> bool:
    if not all(type(m) is nn.Linear for m in members):  # not quantized, adapted or fused already
        return False
    first = members[0].weight
    return all(m.in_features == members[0].in_features and m.weight.dtype == first.dtype
               and m.weight.device == first.device and (m.bias is None) == (members[0].bias is None)
               for m in members)


def _fuse(members: list[nn.Linear]) -> None:
    with torch.no_grad():
        weight = torch.cat([m.weight for m in members])
        bias = torch.cat([m.bias for m in members]) if members[0].bias is not None else None
    lo = 0
    for m in members:
        hi = lo + m.out_features
        m.__class__ = FusedMember
        m.weight = nn.Parameter(weight[lo:hi], requires_grad=m.weight.requires_grad)
        if bias is not None:
            m.bias = nn.Parameter(bias[lo:hi], requires_grad=m.bias.requires_grad)
        m.group_weight, m.group_bias, m.lo, m.hi = weight, bias, lo, hi
        lo = hi


def _pure_ops() -> frozenset:
    aten = torch.ops.aten
    return frozenset((aten.mm.default, aten.addmm.default, aten.bmm.default, aten.permute.default,
                      aten.t.default, aten.view.default, aten._unsafe_view.default, aten.reshape.default,
                      aten.expand.default))


class SameProducts(CustomGraphPass):
    """Inductor's post-grad pass that makes identical matrix products (and the views that feed
    them) one node: the members of a fused group each ask for the group's product of the same
    input. Only these pure operations are merged; anything random or mutating is left alone."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        pure, seen = _pure_ops(), {}
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target not in pure or any(u.op == "output" for u in node.users):
                continue  # an output stays its own tensor
            try:
                key = (node.target, _frozen(node.args), _frozen(node.kwargs))
                hash(key)
            except TypeError:  # a symbolic size the graph holds as a value, not a node
                continue
            if key in seen:
                node.replace_all_uses_with(seen[key])
                graph.erase_node(node)
            else:
                seen[key] = node

    def uuid(self):
        return get_hash_for_files((__file__,))


def _frozen(value):
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value
