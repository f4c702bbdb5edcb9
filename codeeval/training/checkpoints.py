"""A training's checkpoints in the run's storage: one `checkpoint-<step>/` folder per epoch, as the
Trainer writes it, finished only once it holds our mark (written after the Trainer's last file, with
the training's key). A run killed while a checkpoint was half written resumes from the newest
finished one of its own key; older ones are removed only after a newer one is finished, so one is
always there. With CODEEVAL_STORAGE at a URL, a finished checkpoint is put in the store and a host
that has none fetches it (codeeval/core/storage.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

from codeeval.core import files, storage

PREFIX = "checkpoint-"
MARK = "codeeval-finished.json"


def step(folder: Path) -> int:
    return int(folder.name[len(PREFIX):]) if folder.name[len(PREFIX):].isdigit() else -1


def folders(root: Path) -> list[Path]:
    """The checkpoint folders under `root` (this host's and the store's), oldest first."""
    here = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    found = {p.name: p for p in [*here, *storage.folders(root)] if p.name.startswith(PREFIX) and step(p) >= 0}
    return sorted(found.values(), key=step)


def finished(folder: Path, key: str) -> bool:
    mark = storage.fetch(folder / MARK)
    try:
        return json.loads(mark.read_text(encoding="utf-8")).get("key") == key
    except (OSError, ValueError):
        return False


def mark(folder: Path, key: str) -> None:
    """The checkpoint is whole: its files go to the store first, the mark last. (The Trainer writes the
    weights 0600: they get the mode every artifact has, so the team can read them.)"""
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARK):
        files.readable(path)
        storage.publish(path)
    files.write_bytes(folder / MARK, json.dumps({"key": key}).encode())
    storage.publish(folder / MARK)


def newest(root: Path, key: str) -> Optional[Path]:
    """The newest finished checkpoint of `key`, fetched whole from the store when needed; every
    other folder under `root` (half written, or another key's) is removed first."""
    keep = None
    for folder in reversed(folders(root)):
        if keep is None and finished(folder, key):
            keep = storage.fetch_dir(folder)
        else:
            remove(folder)
    return keep


def prune(root: Path, key: str, keep: int) -> None:
    """Only the newest `keep` finished checkpoints of `key` stay (a half-written one is left to
    `newest`: it may be the one being written)."""
    done = [f for f in folders(root) if finished(f, key)]
    for folder in done[:-keep]:
        remove(folder)


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    storage.remove(folder)
