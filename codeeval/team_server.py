"""`codeeval server start`: the team's Prefect server from the installed package, from any directory
(scripts/prefect-server.sh in a checkout runs this too), with the settings ../shared/notes/prefect.md
measured and an API that answers only the holders of its credential (docs/deployment.md, section 2).

The process execs itself as `python -m codeeval.team_server`, which opens SQLite's write
transactions IMMEDIATE (on the Prefect versions that repair was tested on: codeeval/prefect_compat.py
says why) before it hands over to `prefect server start`.
"""
from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import NoReturn, Optional

# concurrency leases on the filesystem (a restart does not leak a crashed holder's slot), a short
# slot wait (repo-level tasks wait on per-repository limits), no analytics (offline); `prefect
# deployment run --watch` streams a run's logs only when the server publishes them (without the last
# two it prints state events and "finished in state 'Failed'", never the scores or the cause)
SETTINGS = {
    "PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE": "prefect.server.concurrency.lease_storage.filesystem",
    "PREFECT_SERVER_CONCURRENCY_MAXIMUM_CONCURRENCY_SLOT_WAIT_SECONDS": "5",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED": "true",
    "PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED": "true",
}
DATABASE = "PREFECT_SERVER_DATABASE_CONNECTION_URL"


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser().absolute()


def credential_file() -> Path:
    """Where the API credential is kept: $CODEEVAL_API_CREDENTIAL, else $PREFECT_HOME/api-credential."""
    return Path(os.environ.get("CODEEVAL_API_CREDENTIAL") or prefect_home() / "api-credential").expanduser()


def ensure_credential(path: Path) -> str:
    """The credential (Prefect's basic auth string, user:password), made at the first start in a
    file that only its owner reads, written beside it and renamed into place."""
    if not path.is_file() or not path.read_text().strip():
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".new")
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"codeeval:{secrets.token_urlsafe(32)}\n")
        os.replace(part, path)
        print(f"prefect server: made its API credential in {path}", file=sys.stderr)
    path.chmod(0o600)
    return path.read_text().strip()


def start(host: str, port: int, public_url: Optional[str], database: Optional[str]) -> NoReturn:
    public_url = (public_url or f"http://127.0.0.1:{port}").rstrip("/")
    env = os.environ
    env["PREFECT_HOME"] = str(prefect_home())
    env.update(SETTINGS)
    env.update(PREFECT_SERVER_API_HOST=host, PREFECT_SERVER_API_PORT=str(port),
               PREFECT_UI_API_URL=f"{public_url}/api", PREFECT_API_URL=f"{public_url}/api")
    if database:
        env[DATABASE] = database
    path = credential_file()
    env["PREFECT_SERVER_API_AUTH_STRING"] = env["PREFECT_API_AUTH_STRING"] = ensure_credential(path)
    print(f'prefect server: clients carry its credential: export PREFECT_API_AUTH_STRING="$(cat {path})"',
          file=sys.stderr)
    url = env.get(DATABASE)
    db = url.split("://")[0] + "://***@" + url.rpartition("@")[2] if url and "@" in url else url
    print(f"prefect server: UI and API at {public_url} (workers: PREFECT_API_URL={public_url}/api); "
          f"database: {db or 'sqlite in ' + env['PREFECT_HOME']}", file=sys.stderr)
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "codeeval.team_server", "--host", host, "--port", str(port)])


if __name__ == "__main__":
    from codeeval.prefect_compat import immediate_sqlite_transactions

    immediate_sqlite_transactions()
    from prefect.cli import app

    sys.argv = ["prefect", "server", "start", *sys.argv[1:]]
    sys.exit(app())
