"""The per-repository lock: one repository's samples one at a time, repositories in parallel.

Two layers, taken in this order:
1. a host-local `flock` on the project's directory itself (an O_RDONLY descriptor: nothing is
   written in the user's tree, and every run on the host meets there whatever its cache): the
   kernel drops it when its holder dies, so whoever holds it knows no live process on this host
   is patching the repository;
2. the Prefect global concurrency limit `repo:<project path>` (limit 1, strict, with a lease;
   created on demand; `/` becomes `:` because Prefect bans `/` in names), so that a Prefect
   server serializes the repository across hosts and the UI shows who waits for what.

A crashed holder's slot: with a Prefect server its lease expires, but the ephemeral API and the
CLI's private server keep leases in memory and have no cleanup service, so the slot leaks for
ever (../shared/notes/prefect.md). We record the holder (host boot id and pid) in
`<journal dir>/holder` before taking the slot and remove it after releasing: a holder file
naming this host, found while we hold the flock, can only be a dead holder's, so its slot is
released (`active_slots` reset to 0) before we wait for it.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator
from uuid import UUID

from codeeval.executors.owners import boot_id

log = logging.getLogger(__name__)

LEASE_S = 300.0  # renewed by Prefect while held; bounds how long a dead holder's slot blocks a server


def limit_name(project_path: str) -> str:
    return "repo:" + project_path.strip("/").replace("/", ":")


@contextmanager
def host_lock(project_dir: Path) -> Iterator[None]:
    fd = os.open(project_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def release_stale_slot(client, name: str, holder_file: Path) -> bool:
    """Free the slot of a dead holder on this host (we hold the flock, so a holder file naming
    this host is a dead process's): release its lease if the server still has it, and reset the
    limit's active slots if they stay taken (the lease died with an ephemeral server). Returns
    whether a slot was freed."""
    from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate

    try:
        holder = json.loads(holder_file.read_text())
    except (OSError, ValueError):
        return False
    if holder.get("boot_id") != boot_id():
        return False
    freed = False
    if client.read_global_concurrency_limit_by_name(name).active_slots > 0:
        if holder.get("lease_id"):
            client.release_concurrency_slots_with_lease(UUID(holder["lease_id"]))
        if client.read_global_concurrency_limit_by_name(name).active_slots > 0:
            client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(active_slots=0))
        log.warning("%s: released the slot of dead holder pid %s", name, holder.get("pid"))
        freed = True
    holder_file.unlink(missing_ok=True)
    return freed


def ensure_limit(client, name: str) -> None:
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    try:
        client.read_global_concurrency_limit_by_name(name)
    except ObjectNotFound:
        try:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
        except ObjectAlreadyExists:  # created by a concurrent run
            pass


@contextmanager
def repo_lock(project_dir: Path, lock_dir: Path, project_path: str, prefect: bool = True) -> Iterator[None]:
    """Hold the repository: the host flock on `project_dir`, then (with `prefect`) its Prefect
    slot, its holder recorded in `lock_dir` (the journal's folder, outside the tree)."""
    with host_lock(project_dir):
        if not prefect:
            yield
            return
        from prefect.client.orchestration import get_client
        # the pieces of prefect.concurrency.sync.concurrency, so that the lease id can be recorded
        from prefect.concurrency._leases import maintain_concurrency_lease
        from prefect.concurrency._sync import acquire_concurrency_slots_with_lease, release_concurrency_slots_with_lease

        name = limit_name(project_path)
        lock_dir.mkdir(parents=True, exist_ok=True)
        holder_file = lock_dir / "holder"  # not *.json: those are journal entries
        with get_client(sync_client=True) as client:
            ensure_limit(client, name)
            release_stale_slot(client, name, holder_file)
        holder = {"boot_id": boot_id(), "pid": os.getpid(), "limit": name, "lease_id": None}
        holder_file.write_text(json.dumps(holder))  # before the slot: a crash after taking it is found
        try:
            acquired = acquire_concurrency_slots_with_lease([name], 1, strict=True, lease_duration=LEASE_S)
            holder_file.write_text(json.dumps(dict(holder, lease_id=str(acquired.lease_id))))
            try:
                with maintain_concurrency_lease(acquired.lease_id, LEASE_S, raise_on_lease_renewal_failure=False):
                    yield
            finally:
                release_concurrency_slots_with_lease(acquired.lease_id)
        finally:
            holder_file.unlink(missing_ok=True)
