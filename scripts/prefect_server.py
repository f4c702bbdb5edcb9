"""`prefect server start`, with one repair for SQLite (scripts/prefect-server.sh runs this).

prefect 3.8.8 opens its server's write transactions on SQLite as DEFERRED: a transaction that
reads and then writes (the worker channel's heartbeat does, every interval) fails at once with
"database is locked" when another connection wrote in between, since SQLite cannot upgrade a
read snapshot that is no longer the newest and does not wait for it (busy_timeout does not
apply). Under load this logged ERROR tracebacks and dropped worker channels. Opened IMMEDIATE,
a transaction takes the write lock first and waits its turn (PRAGMA busy_timeout: 60 s), as
Prefect's own migrations do. Reads outside a transaction are untouched; PostgreSQL is untouched.
"""
from __future__ import annotations

import sys
from contextlib import asynccontextmanager


def immediate_sqlite_transactions() -> None:
    from prefect.server.database.configurations import AioSqliteConfiguration

    deferred = AioSqliteConfiguration.begin_transaction

    @asynccontextmanager
    async def begin_transaction(self, session, with_for_update: bool = False):
        async with deferred(self, session, with_for_update=True) as transaction:
            yield transaction

    AioSqliteConfiguration.begin_transaction = begin_transaction


if __name__ == "__main__":
    immediate_sqlite_transactions()
    from prefect.cli import app

    sys.argv = ["prefect", "server", "start", *sys.argv[1:]]
    sys.exit(app())
