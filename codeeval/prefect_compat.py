"""Where codeeval reaches past what Prefect publishes, and on which Prefect versions it may.

Prefect publishes its flows, tasks, client, settings and `create_app`; the server's router tuple,
`Settings.hash_key` and `AioSqliteConfiguration.begin_transaction` are its own business, and a
release may rename them or change what they mean. Each patch below is applied only on a Prefect
version a test has run it on (TESTED); on any other the server boots plain, and one line says
which patches were skipped and why. CODEEVAL_PREFECT_PATCHES=off forces the plain path
(bench/overhead.py measures what it costs; tests/test_private_server.py runs it on a Prefect
version the patches were not tested on).
"""
from __future__ import annotations

import importlib.metadata
import os
import sys
from contextlib import asynccontextmanager
from typing import Optional

SWITCH = "CODEEVAL_PREFECT_PATCHES"  # "off": every patch skipped

# patch -> the Prefect versions a test ran it on (constraints.txt pins the newest)
TESTED = {
    # the private server's routers in a flow run's order (tests/test_private_server.py)
    "routers": ("3.8.8",),
    # the private server's settings hashed once, not twice (tests/test_private_server.py)
    "hash_key": ("3.8.8",),
    # the team server's SQLite write transactions opened IMMEDIATE (tests/test_deployment.py)
    "sqlite_immediate": ("3.8.8",),
}
SERVER_PATCHES = ("routers", "hash_key")  # what the private server of a CLI run applies


def prefect_version() -> str:
    """The installed Prefect's version, without importing Prefect (a second of the CLI's start)."""
    return importlib.metadata.version("prefect")


def gate(names: tuple[str, ...] = SERVER_PATCHES) -> tuple[tuple[str, ...], Optional[str]]:
    """The patches of `names` to apply here, and the one line that says which were skipped and
    why (None when none was)."""
    if os.environ.get(SWITCH, "").lower() == "off":
        why = f"{SWITCH}=off"
        applied = ()
    else:
        version = prefect_version()
        applied = tuple(name for name in names if version in TESTED[name])
        tested = sorted({v for name in names if name not in applied for v in TESTED[name]})
        why = f"tested on prefect {', '.join(tested)} only, this is {version}"
    skipped = [name for name in names if name not in applied]
    if not skipped:
        return applied, None
    return applied, f"codeeval: Prefect patches skipped ({', '.join(skipped)}): {why}; the server boots plain"


# The routers a flow run calls, in the order it first calls them. FastAPI (>= 0.137) builds a
# router's routes on the first request that walks past them, so with Prefect's order the first
# call (/admin/version) built all 183 routes: 0.2-0.4 s of the server's first answer. The
# prefixes are disjoint, so the order changes no match.
FLOW_RUN_ROUTERS = ("admin", "csrf_token", "flows", "flow_runs", "flow_run_states", "task_runs",
                    "task_run_states", "logs", "artifacts", "events", "block_types", "block_documents",
                    "block_schemas", "concurrency_limits_v2", "variables")

# The routes every `codeeval run` and `codeeval nightly` calls (method, path; None: a websocket),
# served first by a router of their own: the routers above still hold ~100 routes, built on the
# first request that walks past them (flow_runs alone: 21 routes, 0.08 s of server CPU), while a
# run and a nightly call 15. tests/test_private_server.py checks that each resolves to the route Prefect's
# own order would match, and that a run and a nightly build no other router.
FLOW_RUN_ROUTES = (
    ("GET", "/admin/version"), ("GET", "/csrf-token"), ("POST", "/flows/"), ("POST", "/flow_runs/"),
    ("GET", "/admin/storage"), ("PATCH", "/flow_runs/{id:uuid}"), ("POST", "/flow_runs/{id:uuid}/set_state"),
    ("GET", "/flow_runs/{id:uuid}"), ("GET", "/flows/{id:uuid}"), ("POST", "/flow_runs/filter"),
    ("POST", "/task_runs/"), ("PATCH", "/task_runs/{id:uuid}"), ("POST", "/artifacts/"), ("POST", "/logs/"),
    (None, "/events/in"),
)


def flow_run_routes(routers) -> list:
    """The routes of `routers` that FLOW_RUN_ROUTES names, in its order (a path this Prefect lacks
    is left out: the request then walks the routers as before)."""
    found = {(method, route.path): route for router in routers for route in router.routes
             for method in (getattr(route, "methods", None) or {None})}
    return [found[key] for key in FLOW_RUN_ROUTES if key in found]


def api_app(patches: tuple[str, ...]):
    """Prefect's API app as its own temporary server builds it (`create_app(ephemeral=True)`: no UI,
    only the services an ephemeral server runs), with the gated `patches`: "routers" puts a flow
    run's routes first, then its routers (above); "hash_key" keys the app cache by a constant,
    since create_app hashes every setting twice to key it (0.25 s) for the one app this process
    will ever build."""
    from prefect.server.api import server

    if "routers" in patches:
        from fastapi import APIRouter
        from prefect.server import api

        first = tuple(getattr(api, name).router for name in FLOW_RUN_ROUTERS if hasattr(api, name))
        hot = APIRouter()
        hot.routes.extend(flow_run_routes(first))
        server.API_ROUTERS = (hot,) + first + tuple(r for r in server.API_ROUTERS if r not in first)
    if "hash_key" not in patches:
        return server.create_app(ephemeral=True)
    from prefect.settings.models.root import Settings

    key = Settings.hash_key
    Settings.hash_key = lambda self: "codeeval-private-server"
    try:
        return server.create_app(ephemeral=True)
    finally:
        Settings.hash_key = key


def immediate_sqlite_transactions() -> bool:
    """Open the server's SQLite write transactions IMMEDIATE, where TESTED says so (else one line
    on stderr); True if patched. `codeeval server start` (codeeval/team_server.py) calls it first.

    prefect 3.8.8 opens its server's write transactions on SQLite as DEFERRED: a transaction that
    reads and then writes (the worker channel's heartbeat does, every interval) fails at once with
    "database is locked" when another connection wrote in between, since SQLite cannot upgrade a
    read snapshot that is no longer the newest and does not wait for it (busy_timeout does not
    apply). Under load this logged ERROR tracebacks and dropped worker channels. Opened IMMEDIATE,
    a transaction takes the write lock first and waits its turn (PRAGMA busy_timeout: 60 s), as
    Prefect's own migrations do. Reads outside a transaction are untouched; PostgreSQL is untouched."""
    applied, note = gate(("sqlite_immediate",))
    if note:
        print(note, file=sys.stderr, flush=True)
    if not applied:
        return False
    from prefect.server.database.configurations import AioSqliteConfiguration

    deferred = AioSqliteConfiguration.begin_transaction

    @asynccontextmanager
    async def begin_transaction(self, session, with_for_update: bool = False):
        async with deferred(self, session, with_for_update=True) as transaction:
            yield transaction

    AioSqliteConfiguration.begin_transaction = begin_transaction
    return True
