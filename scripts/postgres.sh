#!/usr/bin/env bash
# PostgreSQL for a team's Prefect server (docs/deployment.md): Debian's `postgresql` (installed
# when missing), a cluster of its own in $PGDATA, listening on $PGHOST:$PGPORT, a database
# `prefect` owned by the role `prefect` (password $PGPASSWORD). Prints the one setting the server
# needs, on stdout:
#   PREFECT_SERVER_DATABASE_CONNECTION_URL=postgresql+asyncpg://prefect:...@127.0.0.1:5432/prefect
#   eval "export $(make postgres)" && make prefect-server
#   bash scripts/postgres.sh stop                     # stops the cluster (its data stays)
# Root runs the server as the `postgres` user (PostgreSQL refuses root); its default data directory
# is then /var/lib/postgresql/codeeval-$PGPORT, else .postgres/ in the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
PGHOST="${PGHOST:-127.0.0.1}"
PGPORT="${PGPORT:-5432}"
PGPASSWORD="${PGPASSWORD:-prefect}"
log() { echo "postgres: $*" >&2; }

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bin" ]; then
    log "installing Debian's postgresql"
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
if [ "$(id -u)" = 0 ]; then
    as=(env -C / runuser -u postgres --)  # from /: the checkout may be in a directory only root can enter
    PGDATA="${PGDATA:-/var/lib/postgresql/codeeval-$PGPORT}"
else
    as=()
    PGDATA="${PGDATA:-$PWD/.postgres}"
fi

if [ "${1:-start}" = stop ]; then
    "${as[@]}" "$bin/pg_ctl" -D "$PGDATA" -m fast stop >&2
    exit 0
fi

if [ ! -f "$PGDATA/PG_VERSION" ]; then
    log "new cluster in $PGDATA"
    mkdir -p "$PGDATA"
    [ "$(id -u)" = 0 ] && chown postgres: "$PGDATA"
    chmod 700 "$PGDATA"
    # beside the data directory: wherever the cluster lives, its user can read there
    pwfile="$(dirname "$PGDATA")/.codeeval-pw-$$"
    (umask 077 && printf '%s\n' "$PGPASSWORD" >"$pwfile")
    [ "$(id -u)" = 0 ] && chown postgres: "$pwfile"
    "${as[@]}" "$bin/initdb" -D "$PGDATA" -U prefect --pwfile="$pwfile" --auth-local=scram-sha-256 \
        --auth-host=scram-sha-256 -E UTF8 >&2 || { rm -f "$pwfile"; exit 1; }
    rm -f "$pwfile"
fi
if ! "${as[@]}" "$bin/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1; then
    # the socket lives in the data directory: no /var/run/postgresql needed, no clash between clusters
    "${as[@]}" "$bin/pg_ctl" -D "$PGDATA" -w -t 60 -l "$PGDATA/server.log" \
        -o "-h $PGHOST -p $PGPORT -k $PGDATA -c max_connections=200" start >&2
fi
export PGPASSWORD
if ! "$bin/psql" -h "$PGHOST" -p "$PGPORT" -U prefect -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'prefect'" | grep -q 1; then
    "$bin/psql" -h "$PGHOST" -p "$PGPORT" -U prefect -d postgres -qc "CREATE DATABASE prefect" >&2
fi
log "ready on $PGHOST:$PGPORT (data: $PGDATA)"
echo "PREFECT_SERVER_DATABASE_CONNECTION_URL=postgresql+asyncpg://prefect:$PGPASSWORD@$PGHOST:$PGPORT/prefect"
