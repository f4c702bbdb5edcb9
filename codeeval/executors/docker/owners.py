"""Who owns a sandbox container, and sweeping the containers of runs that died.

Every container we start carries LABEL and OWNER_LABEL = host/boot/pid/start-time of the
process that started it. A container removes itself when its owner dies (its attached stdin
closes, the server exits, auto-remove); a new sandbox also removes any whose owner is gone
(a crash that left one behind, e.g. an engine that was restarted meanwhile).
"""
from __future__ import annotations

import os
import socket
import time

import docker.errors

from codeeval.core.processes import boot_id, start_time

LABEL = "codeeval.sandbox"
OWNER_LABEL = "codeeval.owner"


def _owner_id(pid: int | None = None) -> str:
    """host/boot/pid/start-time of a process: unique even when pids are reused."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}/{boot_id()[:8]}/{pid}/{start_time(pid) or '?'}"


def _owner_alive(owner: str) -> bool:
    try:
        host, boot, pid, start = owner.split("/")
    except ValueError:
        return False
    if host != socket.gethostname():
        return True  # another machine's container on a shared engine: not ours to judge
    return _owner_id(int(pid)) == owner


def _ours(api) -> dict[str, str]:
    """name -> owner of every sandbox container on the engine, running or not."""
    return {c["Names"][0].lstrip("/"): (c.get("Labels") or {}).get(OWNER_LABEL, "")
            for c in api.containers(all=True, filters={"label": LABEL}) if c.get("Names")}


def containers_of(api, pids, sandbox_id: str = "") -> list[str]:
    """Names of the sandbox containers (running or not; of one sandbox id or label value, if
    given) started by these processes of this host's boot: what a test or a bench may count on
    an engine other runs share (another run's containers are never in it)."""
    mine = {f"{socket.gethostname()}/{boot_id()[:8]}/{pid}" for pid in pids}
    found = api.containers(all=True, filters={"label": f"{LABEL}={sandbox_id}" if sandbox_id else LABEL})
    return [c["Names"][0].lstrip("/") for c in found if c.get("Names")
            and (c.get("Labels") or {}).get(OWNER_LABEL, "").rsplit("/", 1)[0] in mine]


def sweep_stale(client) -> list[str]:
    """Remove sandbox containers whose owner process is gone (a crashed run). Returns their names."""
    stale = [name for name, owner in _ours(client.api).items() if not _owner_alive(owner)]
    for name in stale:
        remove(client.api, name)
    if stale:
        _wait_removed(client.api, stale)
    return stale


def remove(api, name: str) -> None:
    """Force-remove a container and return once it is gone; one already gone is fine, one that
    auto-remove is removing already is waited for (it was still listed for a moment under load)."""
    try:
        api.remove_container(name, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress
            raise
        _wait_removed(api, [name])


def _wait_removed(api, names: list[str], seconds: float = 10.0) -> None:
    """Wait until the containers are gone (an auto-remove may still be in progress)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not set(names) & set(_ours(api)):
            return
        time.sleep(0.1)
