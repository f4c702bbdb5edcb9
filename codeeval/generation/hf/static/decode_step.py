"""The device side of the static decoder: the state of S slots (slot cache, newest tokens, seeds,
step counters, a ring of the last steps' tokens) and the fixed-shape step that advances it,
captured once as a CUDA graph on a GPU and then replayed.

A replay is one launch for the whole step (the model's forward, the sampling, the bookkeeping
on the device), so a step costs what its kernels cost, with no Python and no launches per layer
in between. Where ``compile`` is asked for, the model's forward is first compiled by
``torch.compile`` (Inductor fuses the norms, rotary embeddings and activations that the graph
would otherwise replay one small kernel at a time) and the compiled step is what is captured;
the sampling stays eager, so its int64 arithmetic is ATen's. Shapes are marked dynamic where
they vary between runs (slots, cache length), so a new shape is captured, not compiled again.

Each rung can fail on an unusual model or stack: then the next one runs, and says so once in
the log: compiled and captured, captured, plain calls. Running out of memory is not such a
failure; it goes up to the decoder, which halves its slots.
"""
from __future__ import annotations

import logging
import types
from typing import Callable, Optional, Sequence

import torch

from codeeval.generation.hf.sampling import choose, uniforms
from codeeval.generation.hf.static.slot_cache import SlotCache

log = logging.getLogger(__name__)


def compiled(fn: Callable, mode: str = "default", thin_rows: int = 0) -> Callable:
    """``torch.compile`` of the forward: Inductor, no CUDA graphs of its own (the step is
    captured whole), no error when part of the model does not compile (it runs eagerly).
    ``max-autotune-no-cudagraphs`` also times Triton's matrix products against cuBLAS's for each
    shape: minutes more of compiling, for the decode steps of a long run. ``thin_rows``: steps of
    at most that many slots make their matrix products as Inductor's own reductions, with block
    sizes tuned per kernel on a GPU (codeeval/generation/hf/kernels/thin_products.py)."""
    from torch._inductor import list_mode_options

    from codeeval.generation.hf.kernels.fused_products import SameProducts

    options = {**list_mode_options(mode), "post_grad_custom_pre_pass": SameProducts()}
    if thin_rows:
        from codeeval.generation.hf.kernels import thin_products

        options.update(thin_products.inductor_options(thin_rows))
    return torch.compile(own_code(fn), dynamic=None, fullgraph=False, options=options)


def own_code(fn: Callable) -> Callable:
    """``fn`` with a code object of its own. Dynamo keeps its compilations per code object, 8 at
    most, then runs the function uncompiled, saying so in one warning: a process that decoded
    with 8 models (a nightly's, in-process) ran the ninth uncompiled. Each compiled forward,
    one per decoder, now counts only its own."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def mark_dynamic(*tensors: torch.Tensor, dims=(0,)) -> None:
    for t in tensors:
        for d in dims:
            torch._dynamo.maybe_mark_dynamic(t, d)


def mark_static(*tensors: torch.Tensor, dims=(0,)) -> None:
    """Compiled for these sizes even where Dynamo has seen others before (it would go dynamic)."""
    for t in tensors:
        for d in dims:
            torch._dynamo.mark_static(t, d)


class StepRunner:
    """``run()`` executes one step: a graph replay, or a plain call of the step function."""

    def __init__(self, step: Callable[[], None], graph: Optional["torch.cuda.CUDAGraph"], mode: str):
        self.step, self.graph, self.mode = step, graph, mode

    def run(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.step()


def capture(step: Callable[[], None], device: torch.device, warmup: int = 2) -> "torch.cuda.CUDAGraph":
    """Warm-up calls on a side stream (compilation and lazy initialisation happen there), then
    the capture, which runs nothing. The warm-up steps change the state: the caller resets it."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


def build(make_step: Callable[[Optional[Callable]], Callable[[], None]], device: torch.device, use_graph: bool,
          compiled: Sequence[tuple[str, Callable]] = ()) -> StepRunner:
    """The best rung that works: each of the ``compiled`` forwards (named, best first), then the
    plain one; captured where ``use_graph`` on a GPU, then uncaptured. ``make_step(forward)``
    gives the step function (``None``: the plain forward)."""
    graph = use_graph and device.type == "cuda"
    rungs = [(name, fn, graph) for name, fn in compiled] + [("", None, graph)] + [("", None, False)] * graph
    for i, (name, fn, graph) in enumerate(rungs):
        mode = "+".join(m for m in (name, "cuda-graph" if graph else "") if m) or "eager"
        try:
            step = make_step(fn)
            if not graph:
                if fn is not None:
                    step()  # compile now, not inside the first timed step
                return StepRunner(step, None, mode)
            return StepRunner(step, capture(step, device), mode)
        except Exception as exc:  # noqa: BLE001 - any failure of a rung moves to the next
            if is_oom(exc) or i == len(rungs) - 1:
                raise
            log.warning("decode step: %s failed (%s: %s); trying the next way", mode, type(exc).__name__,
                        str(exc).splitlines()[0][:200] if str(exc) else "")
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    raise AssertionError("unreachable")


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


class SlotState:
    """The device state of S slots x L columns and the step that advances it. ``compiled``: the
    compiled forwards to try, named, best first (:func:`live_logits`, then :func:`logits`), before
    the plain one; they are compiled for exactly this many slots where ``exact_slots`` (thin
    products), else for any."""

    def __init__(self, model, args, like, slots: int, length: int, check_every: int, graph: bool,
                 compiled: Sequence[tuple[str, Callable]] = (), exact_slots: bool = False):
        dev = like.layers[0].keys.device
        self.model, self.args = model, args
        self.key = (slots, length, like.layers[0].keys.dtype, args)  # the graph holds args' sampling
        self.cache = SlotCache(like, slots, length)
        self.tok, self.count, self.seeds = (torch.zeros(slots, dtype=torch.long, device=dev) for _ in range(3))
        self.ring = 2 * check_every  # the host reads one window of steps while the next runs
        self.hist = torch.zeros((self.ring, slots), dtype=torch.long, device=dev)
        self.t = torch.zeros(1, dtype=torch.long, device=dev)
        self.exact_slots = exact_slots
        self.runner = build(self._step_fn, dev, graph, compiled)
        self.reset()

    def _step_fn(self, forward: Optional[Callable]) -> Callable[[], None]:
        cache, last = self.cache, self.cache.length - 1
        logits_of = forward or logits
        if forward is not None:
            kv = [t for layer in cache.layers for t in (layer.keys, layer.values)]  # (slots, heads, length, dim)
            mark_dynamic(cache._cols)
            mark_dynamic(*kv, dims=(2,))
            (mark_static if self.exact_slots else mark_dynamic)(self.tok, cache.columns, *kv)  # their dim 0: slots

        def step() -> None:
            scores = logits_of(self.model, self.tok, cache)
            nxt = choose(scores, self.args, uniforms(self.seeds, self.count) if self.args.do_sample else None)
            self.tok.copy_(nxt)
            self.hist.index_copy_(0, self.t % self.ring, nxt[None])
            self.t.add_(1)
            self.count.add_(1)
            cache.columns.add_(1).clamp_(max=last)  # a finished row's slot runs on in place until refilled

        return step

    def reset(self) -> None:
        for t in (self.tok, self.count, self.t, self.cache.columns):
            t.zero_()


def logits(model, tok: torch.Tensor, cache: SlotCache) -> torch.Tensor:
    """The logits of one new token per slot, at the slot's own position."""
    return _forward(model, tok, cache, cache.attention_mask())


def live_logits(query_block: int) -> Callable:
    """:func:`logits`, each slot's attention reading only the blocks of its own columns, in query
    blocks of ``query_block`` rows (codeeval/generation/hf/kernels/live_attention.py; compiled only)."""
    from codeeval.generation.hf.kernels import live_attention

    def forward(model, tok: torch.Tensor, cache: SlotCache) -> torch.Tensor:
        length = cache.layers[0].keys.shape[2]  # the keys' size, not ``cache.length``: compiled for any length
        return _forward(model, tok, cache, live_attention.block_mask(cache.columns, length, query_block))
    return forward


def _forward(model, tok: torch.Tensor, cache: SlotCache, mask) -> torch.Tensor:
    out = model(input_ids=tok[:, None], position_ids=cache.columns[:, None], attention_mask=mask, cache=cache,
                use_cache=True)
    return out.logits[:, -1, :]


class HostCopy:
    """A device tensor copied to the host without blocking; ``values()`` waits for the copy."""

    def __init__(self, t: torch.Tensor):
        if t.device.type != "cuda":
            self.buf, self.event = t.clone(), None
        else:
            self.buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            self.buf.copy_(t, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        self._values: Optional[list] = None

    def values(self) -> list:
        if self._values is None:
            if self.event is not None:
                self.event.synchronize()
            self._values = self.buf.tolist()
        return self._values
