"""Where a `--model` comes from: a local directory, a GGUF file, or a hub id (cached or not).

Resolved before any flow starts, so that a wrong path or an unreachable hub ends in one
line (exit 2) instead of a failed generation shard minutes later. Light on purpose: no
torch or transformers import.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from codeeval import hub
from codeeval.errors import UsageError


@dataclass(frozen=True)
class ModelSource:
    kind: str  # "dir" (config.json), "gguf" (a .gguf file, maybe inside a dir), "hub"
    location: str  # what from_pretrained takes: a directory or a hub id
    gguf_file: Optional[str] = None  # file name inside `location` for GGUF models


def looks_like_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or model.endswith(".gguf") or Path(model).expanduser().exists()


def _gguf_in(directory: Path) -> Optional[str]:
    files = sorted(p.name for p in directory.glob("*.gguf"))
    if len(files) > 1:
        raise UsageError(f"model directory {directory} holds several .gguf files ({', '.join(files)}): "
                         "pass --model with the file itself")
    return files[0] if files else None


def resolve(model: str, revision: Optional[str] = None, check_hub: bool = True) -> ModelSource:
    """The model's source; UsageError with one line when it cannot be loaded from here."""
    if looks_like_path(model):
        path = Path(model).expanduser()
        if path.is_file():
            if path.suffix != ".gguf":
                raise UsageError(f"model file {model} is not a .gguf file (pass a model directory or a .gguf file)")
            return ModelSource("gguf", str(path.parent), path.name)
        if not path.is_dir():
            raise UsageError(f"model path not found: {model}")
        if (path / "config.json").is_file():
            return ModelSource("dir", str(path))
        gguf = _gguf_in(path)
        if gguf:
            return ModelSource("gguf", str(path), gguf)
        raise UsageError(f"model directory {model} has no config.json and no .gguf file")
    if hub.cached_model(model, revision):
        return ModelSource("hub", model)
    if check_hub and not hub.reachable():
        raise UsageError(f"model {model!r} is not a local path and not in the local HF cache ({hub.hub_cache()}), "
                         f"and {hub.unreachable_reason()}: pass a local model directory or a .gguf file")
    if check_hub:
        status = hub.repo_status("model", model, revision)
        if status == 404:
            raise UsageError(f"no model {model!r}" + (f" at revision {revision!r}" if revision else "")
                             + f" on the HF hub ({hub.endpoint()}) and no local path of that name")
        if status in (401, 403):
            raise UsageError(f"model {model!r} on the HF hub is gated or private: set HF_TOKEN "
                             "(and accept its terms on the hub), or pass a local copy")
    return ModelSource("hub", model)
