"""`prefect server start`, with SQLite's write transactions opened IMMEDIATE on the Prefect versions
that patch was tested on (codeeval/prefect_compat.py says why; scripts/prefect-server.sh runs this)."""
from __future__ import annotations

import sys

from codeeval.prefect_compat import immediate_sqlite_transactions

if __name__ == "__main__":
    immediate_sqlite_transactions()
    from prefect.cli import app

    sys.argv = ["prefect", "server", "start", *sys.argv[1:]]
    sys.exit(app())
