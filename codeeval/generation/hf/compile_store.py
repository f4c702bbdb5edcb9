"""Compiled decode steps kept in the team's storage, so that a fresh process on any host starts
decoding in seconds, not in the minute that compiling and capturing takes.

An entry is what torch would otherwise rebuild: its portable caches ("Mega-Cache":
``torch.compiler.save_cache_artifacts``: Inductor's FX graphs with their Triton kernels, AOT
autograd's, autotuning) and, for the C++ kernels that those do not carry (a CPU's), the files the
compile wrote into Inductor's local cache folder. It is keyed by what decides the compiled code:
torch and transformers versions, the device and its capability, the model's config (not its
weights), dtype, slot count (where a step is compiled for one) and the decoder's options. Before
its first compile, a decoder loads the entry of its key; after a compile that found none, it saves
one. Entries live under ``<storage>/compiled/`` (storage.root(): CODEEVAL_STORAGE, a path all hosts
share or an fsspec URL through the local mirror, else runs/).

An entry that cannot be read (torn, foreign, of another torch) is skipped with one warning and the
step compiles as if there were none: a store never fails a run.
"""
from __future__ import annotations

import io
import json
import logging
import os
import platform
import tarfile
import time
from pathlib import Path
from typing import Optional

import torch

from codeeval.core import files, storage
from codeeval.core.fingerprint import digest

log = logging.getLogger(__name__)

FOLDER = "compiled"
MAGIC = b"codeeval-compiled-step/1\n"
CARRIED = ("fxgraph", "aotautograd", "triton", "locks")  # in the Mega-Cache already, or not artifacts


def device_kind(device: torch.device) -> str:
    """What of the device decides the compiled code: a GPU's name and capability; a CPU's ISA."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"cuda:{torch.cuda.get_device_name(device)}:sm{major}{minor}"
    return f"{device.type}:{platform.machine()}:{torch.backends.cpu.get_cpu_capability()}"


def entry_key(model, device: torch.device, **options) -> str:
    import transformers

    config = {k: v for k, v in model.config.to_dict().items()
              if k not in ("_name_or_path", "transformers_version", "_commit_hash")}
    return digest("compiled-step", torch.__version__, transformers.__version__, device_kind(device),
                  json.dumps(config, sort_keys=True, default=str), str(model.dtype),
                  json.dumps(options, sort_keys=True, default=str))[:32]


def _inductor_dir() -> Path:
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir())


class CompileStore:
    """The entries under ``folder``; ``hits`` and ``misses``: keys looked up by this process."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.hits: set[str] = set()
        self.misses: dict[str, float] = {}  # key: when its compiling began (time.time())
        self.saved: dict[str, frozenset] = {}  # key: torch's artifacts in the entry this process last wrote

    @classmethod
    def default(cls) -> "CompileStore":
        return cls(storage.root() / FOLDER)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.bin"

    def load(self, key: str) -> bool:
        """Whether the entry of ``key`` was there and is now in torch's caches (once a process)."""
        if key in self.hits or key in self.misses:
            return key in self.hits
        path = storage.fetch(self.path(key))
        found = False
        if path.is_file():
            try:
                found = self._unpack(key, path.read_bytes())
            except Exception as exc:  # noqa: BLE001 - a bad entry is as if there were none
                log.warning("compile store: %s skipped (%s: %s); compiling", path, type(exc).__name__,
                            (str(exc).splitlines() or [""])[0][:160])
        if found:
            self.hits.add(key)
        else:
            self.misses[key] = time.time()
        return found

    def save(self, key: str) -> Optional[Path]:
        """After compiling on a miss of ``key``: torch's portable caches (all this process holds) and
        the kernel files written since the miss. Written again for a later step of the same key only if
        torch holds artifacts that the last entry did not (a new engine for a step compiled already adds
        none). Failing to write is said and otherwise ignored."""
        since = self.misses.get(key)
        if since is None:
            return None
        try:
            saved = torch.compiler.save_cache_artifacts()
            if saved is None:
                return None
            held = frozenset((kind, name) for kind, names in saved[1].artifacts.items() for name in names)
            if self.saved.get(key) == held:
                return None
            meta = json.dumps({"key": key, "torch": torch.__version__, "written": time.time()}).encode()
            blob = MAGIC + len(meta).to_bytes(4, "big") + meta + len(saved[0]).to_bytes(8, "big") + saved[0] \
                + _kernel_files(_inductor_dir(), since)
            path = files.write_bytes(self.path(key), blob)
            storage.publish(path)
            self.saved[key] = held
            return path
        except Exception as exc:  # noqa: BLE001 - the run decodes on; the next process compiles again
            log.warning("compile store: could not save %s (%s: %s)", self.path(key), type(exc).__name__,
                        (str(exc).splitlines() or [""])[0][:160])
            return None

    def _unpack(self, key: str, blob: bytes) -> bool:
        if not blob.startswith(MAGIC):
            raise ValueError("not a compiled-step entry")
        at = len(MAGIC)
        size = int.from_bytes(blob[at:at + 4], "big")
        meta = json.loads(blob[at + 4:at + 4 + size])
        if meta.get("key") != key or meta.get("torch") != torch.__version__:
            raise ValueError(f"written for {meta.get('key')} by torch {meta.get('torch')}")
        at += 4 + size
        size = int.from_bytes(blob[at:at + 8], "big")
        artifacts, kernels = blob[at + 8:at + 8 + size], blob[at + 8 + size:]
        if len(artifacts) != size:
            raise ValueError("truncated")
        _unpack_kernels(kernels, _inductor_dir())  # first: a torn archive leaves torch's caches untouched
        torch.compiler.load_cache_artifacts(artifacts)
        return True


def _kernel_files(root: Path, since: float) -> bytes:
    """A tar (xz) of the files under Inductor's cache ``root`` modified at or after ``since``, less
    the folders whose content the portable caches carry."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:xz") as tar:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if rel.parts[0] in CARRIED or not path.is_file() or path.stat().st_mtime < since - 1:
                continue
            tar.add(path, arcname=rel.as_posix())
    return out.getvalue()


def _unpack_kernels(data: bytes, root: Path) -> None:
    """The kernel files into Inductor's cache ``root``, each written atomically and never over one
    that is there (their names are digests of their sources)."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        for m in members:
            rel = Path(m.name)
            if rel.is_absolute() or ".." in rel.parts:
                raise ValueError(f"a path outside the cache: {m.name}")
        for m in members:
            target = root / m.name
            if target.exists():
                continue
            content = tar.extractfile(m).read()
            files.write_bytes(target, content)
            os.chmod(target, m.mode & 0o755 | 0o600)
