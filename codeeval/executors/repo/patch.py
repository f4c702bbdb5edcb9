"""Patching a completion into a repository file, and undoing it even after a crash.

The patch is the references' (EvoCodeBench/DevEval `pass_k.py`): the completion is dedented,
re-indented to the record's `indent` (blank lines stay empty), and replaces the body lines
`body_position` (1-based, inclusive) with a blank line before and after it.

Crash safety (the references leave the file patched when anything but a timeout goes wrong):
before a file is patched, its pristine bytes are copied beside a journal entry and both are
fsynced; only then is the file replaced (atomic rename). `restore` puts the pristine bytes back
and checks their sha256; `recover` replays any entry a killed run left behind. A restore whose
hash does not match raises `RestoreFailed`, which stops that repository's work.
"""
from __future__ import annotations

import hashlib
import json
import os
import textwrap
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

JOURNAL_DIR = "repo-journal"  # under $CODEEVAL_CACHE: a run writes nothing in the user's tree
LEGACY_DIR = ".codeeval-journal"  # where earlier versions kept it, inside the tree: replayed, then removed


class RestoreFailed(RuntimeError):
    """A patched file could not be brought back to its pristine bytes: the repository is unsafe to use."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def patched_text(original: str, body_position: tuple[int, int], completion: str, indent: int) -> str:
    """The file with its body lines replaced, exactly as the references write it."""
    body = textwrap.indent(textwrap.dedent(completion), " " * indent)
    lines = original.splitlines(keepends=True)
    start, end = body_position
    return "".join(lines[:start - 1] + ["\n", body, "\n"] + lines[end:])


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.codeeval-tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Journal:
    """The journal of one project: `$CODEEVAL_CACHE/repo-journal/<tree>/<project>/<entry>.json`
    + `.orig`, <tree> a hash of the Source_Code root's real path (its `root` file names it).

    Outside the user's tree, so that a run leaves it byte-identical; a killed run's entries are
    found by the next run that uses the same cache. One folder per project, so that recovering
    one repository never touches a file another live run is patching in another repository."""

    root: Path  # the Source_Code root (the folder holding <topic>/<project>)
    project: str  # the project path under root (DevEval's project_path; EvoCodeBench's project dir)

    @property
    def dir(self) -> Path:
        from codeeval.core.cache import cache_root

        tree = cache_root() / JOURNAL_DIR / hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:16]
        return tree / self.project.replace("/", "__")

    @property
    def project_dir(self) -> Path:
        return self.root / self.project

    @property
    def legacy_dir(self) -> Path:
        return self.root / LEGACY_DIR / self.project.replace("/", "__")

    def _entry(self, rel: str) -> tuple[Path, Path]:
        name = hashlib.sha256(rel.encode()).hexdigest()[:16]
        return self.dir / f"{name}.json", self.dir / f"{name}.orig"

    def pending(self) -> list[Path]:
        return [e for d in (self.dir, self.legacy_dir) if d.is_dir() for e in sorted(d.glob("*.json"))]

    @contextmanager
    def patched(self, rel: str, new_text: str, pristine_sha: str) -> Iterator[Path]:
        """`rel` (relative to root) holds `new_text` inside the block and its pristine bytes after it.

        `pristine_sha` is what the file must hash to after the restore (the hash taken when the
        repository's work began), so that a file that was not pristine to begin with is caught too."""
        path = self.root / rel
        original = path.read_bytes()
        if sha256(original) != pristine_sha:
            raise RestoreFailed(f"{path} is not pristine before patching (sha256 {sha256(original)[:12]}, "
                                f"expected {pristine_sha[:12]})")
        entry, backup = self._entry(rel)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir.parent / "root").write_text(str(self.root.resolve()) + "\n")  # for a person reading the cache
        mode = path.stat().st_mode & 0o7777
        _write_atomic(backup, original, 0o600)
        stat = path.stat()
        _write_atomic(entry, json.dumps({"file": rel, "sha256": pristine_sha, "mode": mode,
                                         "mtime_ns": stat.st_mtime_ns, "pid": os.getpid()}).encode(), 0o600)
        try:
            _write_atomic(path, new_text.encode(), mode)
            yield path
        finally:
            self._replay(entry)

    def _replay(self, entry: Path) -> str:
        """Put the pristine bytes back, check the hash, drop the entry; returns the file restored."""
        meta = json.loads(entry.read_text())
        backup = entry.with_suffix(".orig")
        path = self.root / meta["file"]
        data = backup.read_bytes()
        if sha256(data) != meta["sha256"]:
            raise RestoreFailed(f"journal backup of {path} is damaged (sha256 mismatch); restore it by hand "
                                f"from the project's archive, then delete {entry}")
        _write_atomic(path, data, meta["mode"])
        os.utime(path, ns=(meta["mtime_ns"], meta["mtime_ns"]))
        if sha256(path.read_bytes()) != meta["sha256"]:
            raise RestoreFailed(f"{path} does not hash to its pristine sha256 after restore")
        entry.unlink()
        backup.unlink(missing_ok=True)
        return meta["file"]

    def recover(self) -> list[str]:
        """Restore every file a killed run left patched in this project (call before any work in
        it). Only safe while no other live process patches the project: callers hold its lock."""
        restored = [self._replay(entry) for entry in self.pending()]
        for d in (self.dir, self.legacy_dir):
            if d.is_dir():
                for stale in d.glob("*.orig"):  # a backup whose entry was never written: never patched
                    if not stale.with_suffix(".json").exists():
                        stale.unlink()
        if self.legacy_dir.is_dir():  # an earlier version's lock and holder files: the tree as it was
            for name in ("lock", "holder"):
                (self.legacy_dir / name).unlink(missing_ok=True)
            for d in (self.legacy_dir, self.legacy_dir.parent):
                try:
                    d.rmdir()
                except OSError:  # not empty: another project's entries
                    break
        return restored
