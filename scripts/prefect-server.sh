#!/usr/bin/env bash
# `codeeval server start` in this checkout (codeeval/team_server.py does it all: the settings of
# ../shared/notes/prefect.md, the API credential made at first start in $PREFECT_HOME/api-credential,
# SQLite's transactions opened IMMEDIATE), with the checkout's defaults:
#   make prefect-server                                  # http://127.0.0.1:4200, this machine only
#   HOST=0.0.0.0 PUBLIC_URL=http://gpu-box:4200 make prefect-server   # reachable by worker hosts
# State lives in PostgreSQL when PREFECT_SERVER_DATABASE_CONNECTION_URL names it (scripts/postgres.sh
# prints that line), else in SQLite under $PREFECT_HOME (default: .prefect in the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${PORT:-4200}"
export PREFECT_HOME="${PREFECT_HOME:-$PWD/.prefect}"
exec "${PYTHON:-.venv/bin/python}" -m codeeval server start --host "${HOST:-127.0.0.1}" --port "$PORT" \
    --public-url "${PUBLIC_URL:-http://127.0.0.1:$PORT}"
