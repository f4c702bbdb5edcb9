"""Prefect global concurrency slots for executions that declare lock keys (`Execution.lock_keys`).

A repository's samples run one at a time across every host that talks to the same Prefect
server, repositories in parallel: each key is a global concurrency limit of 1 (created on
demand), held with a lease that a thread renews while the shard runs, so that the UI shows who
waits for what and a dead host's slot comes back when its lease runs out.

Only Prefect's public client is used (increment / renew / release with a lease), so that the
lease id can be recorded: the ephemeral API of `codeeval run` keeps leases in memory with no
cleanup service (../shared/notes/prefect.md), so a SIGKILLed holder's slot would leak for ever.
The holder (host boot id, pid and its start time, lease id) is recorded once the slot is held;
before waiting, a record naming this host and a process that is gone is a dead holder's: its
lease is released.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Sequence
from uuid import UUID

import httpx
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate, GlobalConcurrencyLimitUpdate
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from codeeval.core.cache import cache_root
from codeeval.executors.owners import boot_id

log = logging.getLogger(__name__)

LEASE_S = 300.0  # bounds how long a dead host's slot blocks a real server
RENEW_S = LEASE_S / 4


def _start_time(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (None when it is gone): a pid that was
    reused by another process does not pass for the holder."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _holder_file(name: str) -> Path:
    return cache_root() / "slot-holders" / (name.replace(":", "_") + ".json")


def ensure_limit(client: SyncPrefectClient, name: str) -> None:
    try:
        client.read_global_concurrency_limit_by_name(name)
    except ObjectNotFound:
        try:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
        except ObjectAlreadyExists:  # created by a concurrent run
            pass


def release_dead_holder(client: SyncPrefectClient, name: str) -> bool:
    """Free the slot of a holder on this host whose process is gone. Returns whether one was."""
    path = _holder_file(name)
    try:
        holder = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if holder.get("boot_id") != boot_id() or _start_time(holder["pid"]) == holder.get("start"):
        return False  # another host's (its lease expires), or alive
    released = False
    if holder.get("lease_id"):
        try:
            client.release_concurrency_slots_with_lease(UUID(holder["lease_id"]))
            released = True
        except (httpx.HTTPStatusError, ObjectNotFound):
            pass  # the server lost the lease with its memory (an ephemeral API): free the slot itself
    if not released and client.read_global_concurrency_limit_by_name(name).active_slots > 0:
        client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(active_slots=0))
    log.warning("%s: released the slot of dead holder pid %s", name, holder.get("pid"))
    path.unlink(missing_ok=True)
    return True


def _acquire(client: SyncPrefectClient, names: list[str]) -> UUID:
    """Wait for the slots, freeing those of holders on this host that die meanwhile."""
    while True:
        try:
            response = client.increment_concurrency_slots_with_lease(names, 1, "concurrency", LEASE_S)
            return UUID(response.json()["lease_id"])
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 423:  # 423 Locked: held by someone else
                raise
            for name in names:
                release_dead_holder(client, name)
            time.sleep(min(float(exc.response.headers.get("Retry-After", 1.0)), 5.0))


def _renew(lease_id: UUID, stop: threading.Event) -> None:
    with get_client(sync_client=True) as client:
        while not stop.wait(RENEW_S):
            try:
                client.renew_concurrency_lease(lease_id, LEASE_S)
            except Exception as exc:  # a transient server error: the next renewal may pass
                log.warning("renewing lease %s failed: %s", lease_id, exc)


@contextmanager
def held(names: Sequence[str]) -> Iterator[None]:
    """Hold one slot of each limit in `names` (created on demand, limit 1) for the block."""
    names = sorted(set(names))
    if not names:
        yield
        return
    with get_client(sync_client=True) as client:
        for name in names:
            ensure_limit(client, name)
        lease_id = _acquire(client, names)
        holder = {"boot_id": boot_id(), "pid": os.getpid(), "start": _start_time(os.getpid()),
                  "lease_id": str(lease_id)}
        files = [_holder_file(n) for n in names]
        stop = threading.Event()
        try:
            for f in files:  # only once held: a waiting process must not hide the holder's record
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(json.dumps(holder))
            threading.Thread(target=_renew, args=(lease_id, stop), daemon=True).start()
            yield
        finally:
            stop.set()
            client.release_concurrency_slots_with_lease(lease_id)
            for f in files:
                f.unlink(missing_ok=True)
