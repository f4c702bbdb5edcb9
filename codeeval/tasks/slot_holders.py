"""Who holds a repository's slot on this host, kept so that no slot outlives its holder.

A slot is a Prefect global concurrency limit of 1 (codeeval/tasks/slots.py). The server counts
active slots in its database; it knows its holders only by lease, and the CLI's private server
keeps leases in its memory, which dies with the run. So each holder also records itself here:
one JSON file per limit (process name, lease id, since when, which shard), written under a
host-wide `flock` on the limit taken around the increment and the record, and again around the
release and the removal. The kernel drops a flock when its process dies, so whoever takes it
knows that no live process of this host is between an increment and its record: a held slot
whose record is missing, or names a process that is gone, was left by a dead holder of this
host (SIGKILL at any moment, a private server that died first, a reboot).

The scope says what may be concluded from that:
* host_local: the CLI's private server (PRIVATE_API_ENV), whose SQLite database only this host's
  processes use. A dead holder's slot is freed at once (by its lease, else by resetting the
  count); the records sit beside the database, so every run that uses it sees them.
* otherwise (a team server): a dead holder of this host is freed by its lease; a slot held with
  no record here may be another host's, and its lease lapses on the server (at most LEASE_S).
"""
from __future__ import annotations

import fcntl
import json
import os
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from codeeval.core import files
from codeeval.core.cache import cache_root
from codeeval.core.processes import PRIVATE_API_ENV, ProcessName


@dataclass(frozen=True)
class Holder:
    process: ProcessName
    since: float  # time.time() when the slot was taken
    run: str  # the shard's task run name
    lease_id: str = ""

    def to_json(self) -> dict:
        return {**asdict(self.process), "since": self.since, "run": self.run, "lease_id": self.lease_id}

    @classmethod
    def from_json(cls, record: dict) -> "Holder":
        process = ProcessName(str(record["host"]), str(record["boot"]), int(record["pid"]), record.get("start"))
        return cls(process, float(record["since"]), str(record.get("run", "")), str(record.get("lease_id", "")))


def _file_name(limit: str) -> str:
    return limit.replace(":", "_").replace("/", "_")


@dataclass(frozen=True)
class Scope:
    root: Path
    host_local: bool

    @contextmanager
    def locked(self, limits: Sequence[str]) -> Iterator[None]:
        """Hold the host-wide flock of each limit (taken in sorted order: no two takers deadlock)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with ExitStack() as stack:
            for limit in sorted(limits):
                fd = os.open(self.root / f"{_file_name(limit)}.lock", os.O_RDWR | os.O_CREAT, 0o666)
                stack.callback(os.close, fd)  # closing the descriptor drops its flock
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield

    def _path(self, limit: str) -> Path:
        return self.root / f"{_file_name(limit)}.json"

    def read(self, limit: str) -> Optional[Holder]:
        try:
            return Holder.from_json(json.loads(self._path(limit).read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # none, or half-written by a process killed while writing it

    def write(self, limits: Sequence[str], holder: Holder) -> None:
        for limit in limits:
            files.write_bytes(self._path(limit), json.dumps(holder.to_json()).encode())

    def clear(self, limit: str, lease_id: Optional[str] = None) -> None:
        """Remove the limit's record (only if it holds `lease_id`, when given)."""
        held = self.read(limit)
        if lease_id is None or (held is not None and held.lease_id == lease_id):
            self._path(limit).unlink(missing_ok=True)


def scope() -> Scope:
    """Where this process's API keeps its holders' records, and whether they are all of this host."""
    if os.environ.get(PRIVATE_API_ENV) == "1" and (database := _sqlite_database()) is not None:
        return Scope(database.parent / f"codeeval-slots-{database.stem}", host_local=True)
    return Scope(cache_root() / "slot-holders", host_local=False)


def _sqlite_database() -> Optional[Path]:
    """The SQLite file of the private server (it runs with this process's Prefect settings)."""
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url
    text = url.get_secret_value() if url is not None else ""
    scheme, sep, path = text.partition(":///")
    return Path(path) if sep and scheme.startswith("sqlite") and path else None
