"""The request journal: every answered API request, kept the moment its answer arrives, so that a
request to a paid API is sent once (DESIGN.md, Invariants) and a re-run sends only what was never
answered: after a kill, after a failed shard, or with another task list over the same prompts.

A record is one JSON line: the request's key and its answer (text, finish_reason, usage). The key is
the sha256 of the URL and the whole body (model, endpoint, prompt or messages, sampling parameters,
seed, stop strings) less what only changes the transport (`stream`, `stream_options`); no header goes
in it, so never the API key. Each process appends to a file of its own with O_APPEND and an fsync
per line: writers never share a file (NFS has no atomic append), and a kill loses at most the line
being written, which the next reader skips (a torn last line). A reader takes every file of the
folder, written by any process on any host.

Where: `<storage>/requests/<model>-<digest of base URL and model>/`, the storage being
CODEEVAL_STORAGE (a path every host sees alike) or runs/ (storage.root()): every run under it
shares the journal, whatever its --output_dir. With an fsspec URL as CODEEVAL_STORAGE the files live
in this host's mirror: each writer's file is put in the store every FLUSH_S seconds and when the
call ends, and the store's files are fetched when a journal is opened (a host killed between two
puts has the rest in its own mirror only).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Optional

from codeeval.core import storage

FOLDER = "requests"
TRANSPORT_ONLY = ("stream", "stream_options")
FLUSH_S = 10.0


def journal_dir(root: Path, base_url: str, model: str) -> Path:
    """The folder of one server's model under the storage `root`."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model.rstrip("/").rsplit("/", 1)[-1])[:40] or "model"
    digest = hashlib.sha256(json.dumps([base_url.rstrip("/"), model]).encode()).hexdigest()[:12]
    return root / FOLDER / f"{slug}-{digest}"


def request_key(url: str, body: dict) -> str:
    """What identifies a request's answer: the URL and the body, less the transport's fields."""
    content = {k: v for k, v in body.items() if k not in TRANSPORT_ONLY}
    return hashlib.sha256(json.dumps([url, content], sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class Journal:
    """The answers of one folder, and this process's file in it (opened on the first record)."""

    def __init__(self, folder: Path):
        self.folder = storage.fetch_dir(folder)
        self.answers: dict[str, dict] = {}
        self.torn = 0  # lines skipped: the last line of a writer killed while writing it
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else ():
            self._read(path)
        self._lock = threading.Lock()
        self._fd: Optional[int] = None
        self._path: Optional[Path] = None
        self._published = time.monotonic()

    def _read(self, path: Path) -> None:
        with open(path, "rb") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                    self.answers[record["key"]] = record["answer"]
                except (ValueError, KeyError, TypeError):
                    self.torn += 1

    def get(self, key: str) -> Optional[dict]:
        return self.answers.get(key)

    def put(self, key: str, answer: dict) -> None:
        """Append the answer and fsync it before returning: once this returns, a kill loses nothing."""
        line = (json.dumps({"key": key, "answer": answer, "at": time.time()}, separators=(",", ":")) + "\n").encode()
        with self._lock:
            if self._fd is None:
                self.folder.mkdir(parents=True, exist_ok=True)
                name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
                self._path = self.folder / name
                self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view):]
            os.fsync(self._fd)
            self.answers[key] = answer
            if time.monotonic() - self._published > FLUSH_S:
                self._publish()

    def _publish(self) -> None:
        self._published = time.monotonic()
        if self._path is not None:
            storage.publish(self._path)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                self._publish()
