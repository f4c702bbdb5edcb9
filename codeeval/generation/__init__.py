"""Backends, imported only when chosen (vLLM or an HTTP client never load by default)."""
from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from typing import Optional

from codeeval.generation.base import Backend, GenerationArgs, GenOutput, GenRequest  # noqa: F401

# kind -> "module:Class" under codeeval.generation
BACKENDS = {
    "reference": "reference:ReferenceBackend",
    "replay": "replay.backend:ReplayBackend",
    "transformers": "hf.transformers_backend:TransformersBackend",
    "openai": "api.openai_backend:OpenAIBackend",
    "vllm": "vllm_backend:VLLMBackend",
}
# the backends that load a model's weights onto a device: in team mode their shards take the gpu pool;
# the others (an API, saved generations, the reference) generate on the cpu pool, so that a run that
# waits on the network holds no GPU worker (codeeval/flows/remote.py)
LOADS_WEIGHTS = frozenset({"transformers", "vllm"})


@dataclass(frozen=True)
class BackendSpec:
    """Everything needed to build a backend; hashable, so it also keys the model cache."""

    kind: str
    model: str
    args: GenerationArgs = GenerationArgs()
    generations_path: Optional[str] = None  # replay
    device: Optional[str] = None  # e.g. "cuda:1" for one device shard; None = backend default
    options: tuple[tuple[str, str], ...] = ()  # backend-specific settings (base_url, ...)


def backend_class(kind: str) -> type[Backend]:
    module, _, cls = BACKENDS[kind].partition(":")
    return getattr(importlib.import_module(f"codeeval.generation.{module}"), cls)


_lock = threading.Lock()
_open: dict[Optional[str], tuple[BackendSpec, Backend]] = {}  # device -> the model loaded there


def open_backend(spec: BackendSpec) -> Backend:
    """Build the backend once per process, spec and device: a loaded model is a resource, not
    state (outputs stay a pure function of the inputs), and the shards of a run share it.
    One model is kept per device; a different spec on that device replaces it."""
    with _lock:
        held = _open.get(spec.device)
        if held is None or held[0] != spec:
            _open.pop(spec.device, None)
            if held is not None:
                held[1].close()
            _open[spec.device] = (spec, backend_class(spec.kind)(spec))
        return _open[spec.device][1]
