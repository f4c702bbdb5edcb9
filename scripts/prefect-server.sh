#!/usr/bin/env bash
# A Prefect server for a team (or one laptop) with the settings of ../shared/notes/prefect.md:
# concurrency leases on the filesystem (a restart does not leak a crashed holder's slot), a
# short slot wait (repo-level tasks wait on per-repository limits), no analytics (offline), and an API
# that answers only its credential's holders (made at first start: $PREFECT_HOME/api-credential).
#   make prefect-server                                  # http://127.0.0.1:4200, this machine only
#   HOST=0.0.0.0 PUBLIC_URL=http://gpu-box:4200 make prefect-server   # reachable by worker hosts
# State lives in PostgreSQL when PREFECT_SERVER_DATABASE_CONNECTION_URL names it (scripts/postgres.sh
# prints that line), else in SQLite under $PREFECT_HOME (default: .prefect in the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-4200}"
PUBLIC_URL="${PUBLIC_URL:-http://127.0.0.1:$PORT}"
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
export PREFECT_SERVER_API_HOST="$HOST" PREFECT_SERVER_API_PORT="$PORT"
export PREFECT_UI_API_URL="$PUBLIC_URL/api" PREFECT_API_URL="$PUBLIC_URL/api"
export PREFECT_SERVER_CONCURRENCY_LEASE_STORAGE=prefect.server.concurrency.lease_storage.filesystem
export PREFECT_SERVER_CONCURRENCY_MAXIMUM_CONCURRENCY_SLOT_WAIT_SECONDS=5
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
# `prefect deployment run --watch` streams a run's logs only when the server publishes them: without
# these it prints state events and "finished in state 'Failed'", never the scores or the cause.
export PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED=true PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED=true
# The database: PREFECT_SERVER_DATABASE_CONNECTION_URL from scripts/postgres.sh for a team, else SQLite
# in $PREFECT_HOME.
PYTHON="${PYTHON:-.venv/bin/python}"
# The API answers only clients that carry its credential (Prefect's basic auth string, user:password):
# made at the first start, kept in a file that only its owner reads. Clients, workers and `prefect
# deploy` carry it as PREFECT_API_AUTH_STRING; the UI asks for it (docs/deployment.md, section 2).
CREDENTIAL="${CODEEVAL_API_CREDENTIAL:-$PREFECT_HOME/api-credential}"
if [ ! -s "$CREDENTIAL" ]; then
    mkdir -p "$(dirname "$CREDENTIAL")"
    (umask 077 && "$PYTHON" -c 'import secrets; print("codeeval:" + secrets.token_urlsafe(32))' > "$CREDENTIAL.new" \
        && mv "$CREDENTIAL.new" "$CREDENTIAL")
    echo "prefect server: made its API credential in $CREDENTIAL" >&2
fi
chmod 600 "$CREDENTIAL"
PREFECT_SERVER_API_AUTH_STRING="$(cat "$CREDENTIAL")"
export PREFECT_SERVER_API_AUTH_STRING PREFECT_API_AUTH_STRING="$PREFECT_SERVER_API_AUTH_STRING"
echo "prefect server: clients carry its credential: export PREFECT_API_AUTH_STRING=\"\$(cat $CREDENTIAL)\"" >&2
db="${PREFECT_SERVER_DATABASE_CONNECTION_URL:-sqlite in $PREFECT_HOME}"
echo "prefect server: UI and API at $PUBLIC_URL (workers: PREFECT_API_URL=$PUBLIC_URL/api); database: ${db//:*@/:***@}" >&2
# `prefect server start`, with SQLite's write transactions opened IMMEDIATE (scripts/prefect_server.py)
exec "$PYTHON" scripts/prefect_server.py --host "$HOST" --port "$PORT"
