#!/usr/bin/env bash
# Make sure a Docker engine is installed and running (idempotent).
#
#   1. `dockerd` missing  -> apt-get update && apt-get install docker.io (Debian's package)
#   2. `docker info` fails -> start dockerd in the background (log: $DOCKERD_LOG)
#   3. wait until the engine answers (up to $DOCKER_WAIT_S seconds)
#
# Needs root for steps 1 and 2; fails with a clear message where it cannot act.
set -euo pipefail

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/codeeval-dockerd.log}
DOCKER_WAIT_S=${DOCKER_WAIT_S:-60}

say() { echo "ensure-docker: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    is_root || die "the Docker engine is not installed and I am not root: install Debian's docker.io (sudo apt-get install docker.io) and re-run."
    command -v apt-get >/dev/null 2>&1 || die "the Docker engine is not installed and apt-get is not available: install Docker by hand."
    say "Docker engine missing: installing Debian's docker.io (apt-get update && apt-get install -y docker.io) ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed (is a Debian mirror reachable?)"
    apt-get install -y -qq --no-install-recommends docker.io >/dev/null \
        || die "apt-get install docker.io failed"
    say "installed $(dockerd --version 2>/dev/null || echo docker.io)"
fi

if docker info >/dev/null 2>&1; then
    say "Docker engine is running ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))."
    exit 0
fi

dockerd_running() {
    { [ -f /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid 2>/dev/null)" 2>/dev/null; } \
        || { command -v pgrep >/dev/null 2>&1 && pgrep -x dockerd >/dev/null 2>&1; }
}

# The engine is installed but not answering.
if dockerd_running; then
    say "dockerd is running but not answering yet; waiting ..."
else
    is_root || die "dockerd is not running and I am not root: start it (sudo dockerd &, or sudo service docker start), or add yourself to the docker group."
    say "dockerd is not running: starting it in the background (log: $DOCKERD_LOG) ..."
    # A stale pid file from a dead dockerd blocks a new one.
    if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid 2>/dev/null)" 2>/dev/null; then
        rm -f /var/run/docker.pid
    fi
    mkdir -p "$(dirname "$DOCKERD_LOG")"
    nohup setsid dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 $((DOCKER_WAIT_S * 2))); do
    if docker info >/dev/null 2>&1; then
        say "Docker engine is ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))."
        exit 0
    fi
    sleep 0.5
done
say "last lines of $DOCKERD_LOG:"
tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
die "the Docker engine did not answer within ${DOCKER_WAIT_S}s (docker info fails); see $DOCKERD_LOG."
