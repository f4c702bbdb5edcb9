"""Stable hashes for cache keys: of values, files, models and of this code."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Optional


def digest(*parts: Any) -> str:
    """sha256 of a JSON rendering of `parts` (dataclasses become dicts)."""
    def default(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj):
            return dataclasses.asdict(obj)
        if isinstance(obj, Path):
            return str(obj)
        raise TypeError(f"cannot fingerprint {type(obj).__name__}")

    text = json.dumps(parts, sort_keys=True, default=default, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


SMALL_MODEL_FILES = (".json", ".txt", ".model", ".py", ".jinja")  # hashed by content


def model_fingerprint(model: str, revision: Optional[str] = None) -> str:
    """Hub id + revision, or for a local directory its small files' content and the other
    files' sizes and mtimes (weights are too large to hash on every run; rewriting them
    changes the mtime). A single weights file (``--model x.gguf``) counts with the small
    files beside it, which transformers may read too (tokenizer_config.json, a template)."""
    path = Path(model).expanduser()
    if path.is_file():
        kind, root = "file", path.parent
        files = [path] + [p for p in root.iterdir() if p.is_file() and p.suffix in SMALL_MODEL_FILES]
    elif path.is_dir():
        kind, root = "dir", path
        files = [p for p in path.rglob("*") if p.is_file()]
    else:
        return f"hub:{model}@{revision or 'main'}"
    h = hashlib.sha256()
    for f in sorted(set(files)):
        name = f.relative_to(root).as_posix().encode()
        if f.suffix in SMALL_MODEL_FILES:
            h.update(name + b"\0" + f.read_bytes() + b"\0")
        else:
            st = f.stat()
            h.update(name + f"\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return f"{kind}:{path.name}@{h.hexdigest()[:16]}"  # no host path: a moved model keeps its key


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of codeeval's own sources: a code change invalidates every cached shard. Hidden folders
    are not sources: an image build stages a whole root file system in codeeval/.cache/images (a
    checkout's; a wheel has none), whose Python files would change the hash, and vanish under a
    reader while another process builds (CI: a flow failed with FileNotFoundError)."""
    from codeeval import __version__

    root = Path(__file__).resolve().parents[1]  # the codeeval package, every layer of it
    h = hashlib.sha256(__version__.encode())
    for source in sorted(root.rglob("*.py")):
        name = source.relative_to(root)
        if any(part.startswith(".") for part in name.parts[:-1]):
            continue
        h.update(name.as_posix().encode())
        h.update(source.read_bytes())
    return h.hexdigest()[:16]
