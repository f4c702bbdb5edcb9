#!/usr/bin/env bash
# Make sure a Docker engine is installed and running (idempotent).
#
#   1. `dockerd` missing  -> apt-get update && apt-get install docker.io (Debian's package)
#   2. `docker info` fails -> start dockerd in the background (log: $DOCKERD_LOG)
#   3. wait until the engine answers (up to $DOCKER_WAIT_S seconds)
#   4. RUNTIME=runsc (`make engine RUNTIME=runsc`): install Debian's gVisor (package runsc) when
#      missing and register it as a runtime of the engine in /etc/docker/daemon.json; the engine
#      rereads its runtimes on SIGHUP, so a running dockerd is reloaded, never restarted
#
# Needs root for steps 1, 2 and 4; fails with a clear message where it cannot act.
set -euo pipefail

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/codeeval-dockerd.log}
DOCKER_WAIT_S=${DOCKER_WAIT_S:-60}
RUNTIME=${RUNTIME:-}
DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
# gVisor's platform: Debian's build (2022-12) has ptrace and kvm; kvm needs /dev/kvm and locked
# memory, which containers and most VMs lack (docs/security.md, "gVisor").
RUNSC_PLATFORM=${RUNSC_PLATFORM:-ptrace}

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

engine_up() {
    if docker info >/dev/null 2>&1; then
        say "Docker engine is running ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))."
        return 0
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
            return 0
        fi
        sleep 0.5
    done
    say "last lines of $DOCKERD_LOG:"
    tail -n 20 "$DOCKERD_LOG" >&2 2>/dev/null || true
    die "the Docker engine did not answer within ${DOCKER_WAIT_S}s (docker info fails); see $DOCKERD_LOG."
}

has_runtime() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q "\"$1\""; }

runtime_up() {
    [ -z "$RUNTIME" ] || [ "$RUNTIME" = runc ] && return 0
    [ "$RUNTIME" = runsc ] || die "RUNTIME=$RUNTIME: only runsc (gVisor) is set up here; register others in $DAEMON_JSON by hand."
    if ! command -v runsc >/dev/null 2>&1; then
        is_root || die "gVisor (runsc) is not installed and I am not root: sudo apt-get install runsc, and re-run."
        say "gVisor missing: installing Debian's runsc (apt-get install -y runsc) ..."
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends runsc >/dev/null 2>&1 \
            || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends runsc >/dev/null; } \
            || die "apt-get install runsc failed"
        say "installed $(runsc --version 2>/dev/null | head -1)"
    fi
    is_root || { has_runtime runsc && return 0; die "runsc is not registered with the engine and I am not root: add it to $DAEMON_JSON as root."; }
    mkdir -p "$(dirname "$DAEMON_JSON")"
    changed=$(python3 - "$DAEMON_JSON" "$(command -v runsc)" "$RUNSC_PLATFORM" <<'PY'
import json, os, sys
path, binary, platform = sys.argv[1:]
config = {}
if os.path.exists(path) and open(path).read().strip():
    config = json.load(open(path))
# --network=none: no network stack in the sandbox at all (every codeeval container is --network
# none; gVisor also refuses Docker's none namespace inside some hosts' containers).
entry = {"path": binary, "runtimeArgs": [f"--platform={platform}", "--network=none"]}
if config.get("runtimes", {}).get("runsc") != entry:
    config.setdefault("runtimes", {})["runsc"] = entry
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent=2)
    os.replace(path + ".tmp", path)
    print("changed")
PY
) || die "cannot update $DAEMON_JSON"
    if [ -z "$changed" ] && has_runtime runsc; then
        say "runsc is a runtime of the engine (--platform=$RUNSC_PLATFORM, $DAEMON_JSON)."
        return 0
    fi
    say "registered runsc (--platform=$RUNSC_PLATFORM) in $DAEMON_JSON; reloading dockerd's configuration (SIGHUP, no restart) ..."
    pkill -HUP -x dockerd || die "no dockerd to reload: is the engine remote (DOCKER_HOST)? Register runsc on that host."
    sleep 0.5
    for _ in $(seq 1 20); do
        has_runtime runsc && { say "runsc is a runtime of the engine."; return 0; }
        sleep 0.5
    done
    die "dockerd did not take runsc from $DAEMON_JSON (see $DOCKERD_LOG)."
}

engine_up
runtime_up
