"""Prefect global concurrency slots for executions that declare lock keys (`Execution.lock_keys`).

A repository's samples run one at a time across every host that talks to the same Prefect
server, repositories in parallel: each key is a global concurrency limit of 1 (created on
demand), held with a lease that a thread renews while the shard runs, so that the UI shows who
waits for what and a dead host's slot comes back when its lease runs out.

No slot outlives its holder: each holder is recorded on its host (codeeval/tasks/slot_holders.py),
and a waiter frees the slot of a dead one at once (the CLI's private server, whose holders are
all of this host, and any holder of this host on a team server), else the lease lapses on the
server. A shard that waits longer than WAIT_NOTICE_S says once, in its log (so on the terminal
too), what it waits for and who holds it, and leaves a record that `codeeval inspect` reads.
"""
from __future__ import annotations

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

from codeeval.core.processes import ProcessName
from codeeval.executors.repo.lock import describe_limit
from codeeval.pipeline import waits
from codeeval.tasks.slot_holders import Holder, Scope, scope

log = logging.getLogger(__name__)

LEASE_ENV = "CODEEVAL_SLOT_LEASE_S"
LEASE_S = 300.0  # bounds how long a dead holder of another host blocks a team server's slot
MIN_LEASE_S = 60.0  # the least Prefect accepts
WAIT_NOTICE_S = 5.0  # a longer wait is said once
POLL_S = 2.0  # at most this long between two tries for a held slot
RELEASE_RETRIES = 2  # a few seconds, not Prefect's default minute of retries against a server that is gone


def lease_s() -> float:
    """The lease (CODEEVAL_SLOT_LEASE_S seconds, default LEASE_S, at least MIN_LEASE_S)."""
    try:
        return max(MIN_LEASE_S, float(os.environ.get(LEASE_ENV) or LEASE_S))
    except ValueError:
        return LEASE_S


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def ensure_limit(client: SyncPrefectClient, name: str) -> None:
    try:
        client.read_global_concurrency_limit_by_name(name)
    except ObjectNotFound:
        try:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
        except ObjectAlreadyExists:  # created by a concurrent run
            pass


def free_dead_holder(client: SyncPrefectClient, where: Scope, name: str) -> bool:
    """Free the slot of `name` when its holder is a process of this host that is gone (on the
    private server: when no live process holds it). Call under where.locked. Returns whether
    anything was freed (try again at once)."""
    holder = where.read(name)
    if holder is not None and holder.process.alive() is not False:
        return False  # alive, or another host's (its lease lapses on the server)
    if holder is None and not where.host_local:
        return False  # perhaps another host's
    if holder is not None:
        if holder.lease_id:  # a server that no longer knows the lease (a private one that died) ignores this
            client.release_concurrency_slots_with_lease(UUID(holder.lease_id))
        where.clear(name)
    if where.host_local and client.read_global_concurrency_limit_by_name(name).active_slots > 0:
        client.update_global_concurrency_limit(name, GlobalConcurrencyLimitUpdate(active_slots=0))
    who = f"{holder.process} ({holder.run or 'a shard'})" if holder else "a holder that died before it recorded itself"
    _logger().warning("%s: freed its slot %s, left by %s, which is gone", describe_limit(name), name, who)
    return True


def _holder_text(where: Scope, names: Sequence[str]) -> str:
    holders = {n: where.read(n) for n in names}
    known = [f"held by {h.process} since {_clock(h.since)} ({h.run or 'a shard'})" for h in holders.values()
             if h is not None and h.process.alive() is not False]
    if known:
        return "; ".join(known)
    return f"its holder is not known on this host: another host's, whose lease lapses within {lease_s():.0f} s"


class _Waiting:
    """Says once, after WAIT_NOTICE_S, what a shard waits for; the record for `codeeval inspect`."""

    def __init__(self, names: Sequence[str], run: str, record: Optional[Path]):
        self.names, self.run, self.record = list(names), run, record
        self.since = time.time()
        self.told = False

    def tick(self, where: Scope) -> None:
        if self.told or time.time() - self.since < WAIT_NOTICE_S:
            return
        self.told = True
        what = ", ".join(describe_limit(n) for n in self.names)
        holders = _holder_text(where, self.names)
        _logger().warning("waiting since %s for %s (Prefect limit %s): %s", _clock(self.since), what,
                          ", ".join(self.names), holders)
        if self.record is not None:
            waits.write(self.record, run=self.run, limits=self.names, what=what, since=self.since,
                        waiter=ProcessName.this(), holders=holders)

    def done(self) -> None:
        if self.told:
            _logger().info("%s: taken after %.1f s", ", ".join(self.names), time.time() - self.since)
        if self.record is not None:
            waits.clear(self.record)


def _logger():
    """The task run's logger inside a run (the UI and the terminal), else this module's."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    try:
        return get_run_logger()
    except MissingContextError:
        return log


def _acquire(client: SyncPrefectClient, names: list[str], where: Scope, holder: Holder,
             waiting: _Waiting) -> UUID:
    """Wait for the slots, freeing those of holders that are gone."""
    while True:
        with where.locked(names):  # no process of this host is between an increment and its record
            try:
                response = client.increment_concurrency_slots_with_lease(names, 1, "concurrency", lease_s())
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code != 423:  # 423 Locked: held by someone else
                    raise
                retry = min(float(exc.response.headers.get("Retry-After", 1.0)), POLL_S)
                freed = [free_dead_holder(client, where, name) for name in names]
            else:
                lease_id = UUID(response.json()["lease_id"])
                where.write(names, Holder(holder.process, time.time(), holder.run, str(lease_id)))
                return lease_id
        if not any(freed):
            waiting.tick(where)
            time.sleep(retry)


def _renew(lease_id: UUID, stop: threading.Event) -> None:
    duration = lease_s()
    with get_client(sync_client=True) as client:
        while not stop.wait(duration / 4):
            try:
                client.renew_concurrency_lease(lease_id, duration)
            except Exception as exc:  # a transient server error: the next renewal may pass
                log.warning("renewing lease %s failed: %s", lease_id, exc)  # a thread outside the run


@contextmanager
def held(names: Sequence[str], run: str = "", wait_record: Optional[Path] = None) -> Iterator[None]:
    """Hold one slot of each limit in `names` (created on demand, limit 1) for the block. `run`
    names the holder in messages; `wait_record` is where a long wait is recorded (pipeline/waits.py)."""
    names = sorted(set(names))
    if not names:
        yield
        return
    where = scope()
    with get_client(sync_client=True) as client:
        for name in names:
            ensure_limit(client, name)
        waiting = _Waiting(names, run, wait_record)
        try:
            lease_id = _acquire(client, names, where, Holder(ProcessName.this(), 0.0, run), waiting)
        finally:
            waiting.done()
        stop = threading.Event()
        threading.Thread(target=_renew, args=(lease_id, stop), daemon=True).start()
        try:
            yield
        finally:
            stop.set()
            _release(client, names, where, lease_id)


def _release(client: SyncPrefectClient, names: list[str], where: Scope, lease_id: UUID) -> None:
    """Release the lease and remove the records, under the flocks (a waiter never sees the count
    and the records disagree). A server that is gone leaves the slot to the next taker's check."""
    from prefect.settings import PREFECT_CLIENT_MAX_RETRIES, temporary_settings

    with where.locked(names), temporary_settings(updates={PREFECT_CLIENT_MAX_RETRIES: RELEASE_RETRIES}):
        try:
            client.release_concurrency_slots_with_lease(lease_id)
        except Exception as exc:  # noqa: BLE001 - the shard's work is done; its slot is freed as a dead one's
            _logger().warning("%s: releasing the slot failed (%s); the next taker frees it", ", ".join(names),
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        finally:
            for name in names:
                where.clear(name, str(lease_id))
