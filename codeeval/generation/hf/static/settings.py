"""The static decoder's settings, one frozen value: each is an option of the transformers backend
(generation/options.py, where its default and, for a default the machine decides, that rule are
declared), resolved once for this machine by `StaticSettings.resolve`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from codeeval.generation import options


@dataclass(frozen=True)
class StaticSettings:
    compile: bool  # torch.compile the step (option compile)
    graph: bool  # capture it as a CUDA graph (cuda_graph)
    check_every: int  # steps between host checks for stop strings (check_every)
    prefill_tokens: int  # padded prompt tokens a prefill takes (prefill_tokens)
    compile_mode: str  # Inductor's mode (compile_mode)
    fuse: bool  # q/k/v and gate/up as one product each (fuse_products)
    thin_rows: int  # steps of at most this many slots: Inductor's own products (thin_products)
    live_from: int  # steps of at least this many slots: live attention (live_attention)
    live_exact: bool  # live steps compiled per exact slot count on a GPU too (live_exact)
    query_block: int  # FlexAttention's query rows per block in live steps (live_query_block)
    store: bool  # compiled steps kept in the team's storage (compile_store)

    @classmethod
    def resolve(cls, given: Mapping[str, Any], machine: options.Machine) -> "StaticSettings":
        """From the backend's options as `options.parse` returns them (or a subset of them, given:
        the rest at their defaults), decided for `machine`."""
        values = options.resolve("transformers", {**options.parse("transformers", {}), **given}, machine)
        return cls(compile=values["compile"], graph=values["cuda_graph"], check_every=values["check_every"],
                   prefill_tokens=values["prefill_tokens"], compile_mode=values["compile_mode"],
                   fuse=values["fuse_products"], thin_rows=values["thin_products"],
                   live_from=values["live_attention"], live_exact=values["live_exact"],
                   query_block=values["live_query_block"], store=values["compile_store"])
