"""Where a model's files are: a hub id, a model directory, or a GGUF file.

transformers loads GGUF (dequantizing it) with ``from_pretrained(directory, gguf_file=name)``
for the tokenizer and the model alike, so ``--model`` may name a ``.gguf`` file, or a
directory that holds one ``.gguf`` file and no ``config.json``. Kept free of torch and
transformers so the CLI can check ``--model`` before anything loads.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from codeeval.errors import UsageError

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


def resolve(model: str) -> ModelSource:
    """``--model`` as transformers loads it; a missing ``.gguf`` file or an ambiguous
    directory (several ``.gguf`` files, no config.json) is a UsageError."""
    path = Path(model).expanduser()
    if path.suffix.lower() == GGUF:
        if not path.is_file():
            raise UsageError(f"model file not found: {model}")
        return ModelSource(str(path.parent), path.name)
    if path.is_dir() and not (path / "config.json").is_file():
        found = sorted(p.name for p in path.iterdir() if p.suffix.lower() == GGUF and p.is_file())
        if len(found) > 1:
            raise UsageError(f"{model} holds several GGUF files ({', '.join(found)}) and no config.json: "
                             "pass one of them as --model")
        if found:
            return ModelSource(str(path), found[0])
    return ModelSource(model)
