"""Where a `--model` comes from: a model directory, a GGUF file, or a hub id (cached or not).

transformers loads GGUF (dequantizing it) with ``from_pretrained(directory, gguf_file=name)``
for the tokenizer and the model alike, so ``--model`` may name a ``.gguf`` file, or a
directory that holds one ``.gguf`` file and no ``config.json``. Resolved before any flow
starts, so that a wrong path or an unreachable hub ends in one line (exit 2) instead of a
failed generation shard minutes later. Light on purpose: no torch or transformers import.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from codeeval.core import hub
from codeeval.core.errors import UsageError

GGUF = ".gguf"


@dataclass(frozen=True)
class ModelSource:
    name_or_path: str  # what from_pretrained gets: a hub id or a local directory
    gguf_file: Optional[str] = None  # a GGUF file inside that directory

    def load_kwargs(self) -> dict:
        return {"gguf_file": self.gguf_file} if self.gguf_file else {}

    def single_file(self) -> str:
        """The GGUF file's path, else name_or_path (vLLM takes a GGUF model as one file)."""
        return str(Path(self.name_or_path) / self.gguf_file) if self.gguf_file else self.name_or_path


def looks_like_path(model: str) -> bool:
    return (model.startswith(("/", "./", "../", "~")) or model.lower().endswith(GGUF)
            or Path(model).expanduser().exists())


def resolve(model: str, revision: Optional[str] = None, check_hub: bool = False) -> ModelSource:
    """``--model`` as transformers loads it; UsageError with one line when it cannot be loaded
    from here. Hub ids pass through unless `check_hub` (the CLI's pre-flight): then one must be
    in the local HF cache or on a reachable hub."""
    if not looks_like_path(model):
        if check_hub:
            check_hub_model(model, revision)
        return ModelSource(model)
    path = Path(model).expanduser()
    if path.suffix.lower() == GGUF or path.is_file():
        if not path.is_file():
            raise UsageError(f"model file not found: {model}")
        if path.suffix.lower() != GGUF:
            raise UsageError(f"model file {model} is not a .gguf file (pass a model directory or a .gguf file)")
        return ModelSource(str(path.parent), path.name)
    if not path.is_dir():
        raise UsageError(f"model path not found: {model}")
    if (path / "config.json").is_file():
        return ModelSource(str(path))
    found = sorted(p.name for p in path.iterdir() if p.suffix.lower() == GGUF and p.is_file())
    if len(found) > 1:
        raise UsageError(f"{model} holds several GGUF files ({', '.join(found)}) and no config.json: "
                         "pass one of them as --model")
    if not found:
        raise UsageError(f"model directory {model} has no config.json and no .gguf file")
    return ModelSource(str(path), found[0])


def check_hub_model(model: str, revision: Optional[str]) -> None:
    """A hub id loads from the local HF cache, or the hub answers and has it."""
    if hub.cached_model(model, revision):
        return
    if not hub.reachable():
        raise UsageError(f"model {model!r} is not a local path and not in the local HF cache ({hub.hub_cache()}), "
                         f"and {hub.unreachable_reason()}: pass a local model directory or a .gguf file")
    status = hub.repo_status("model", model, revision)
    if status == 404:
        raise UsageError(f"no model {model!r}" + (f" at revision {revision!r}" if revision else "")
                         + f" on the HF hub ({hub.endpoint()}) and no local path of that name")
    if status in (401, 403):
        raise UsageError(f"model {model!r} on the HF hub is gated or private: set HF_TOKEN "
                         "(and accept its terms on the hub), or pass a local copy")
