#!/usr/bin/env bash
# Build the execution images offline (no image registry is reachable here). Idempotent:
# a no-op when the images tagged with the current recipe's hash exist.
#
#   codeeval-base:<hash>    Debian bookworm minbase + python3, made by debootstrap and
#                           `docker import` (recipe: containers/base/rootfs.sh)
#   codeeval-packages:<hash>  the base + the wheels of containers/python/requirements.txt,
#                           downloaded on the host (recipe: containers/python/stage.sh)
#   codeeval-python:<hash>  the packages + the sandbox server, non-root user
#                           (recipe: this file, executors/runner.py, executors/cputime/,
#                           executors/docker/inside/)
#
# The tags come from executors/docker/images.py, which the Docker sandbox uses to find the image.
# Each tag hashes its recipe files (and its parent's tag): every step that shapes the base
# and packages images lives in their recipe scripts, so that a changed step changes the tag;
# this file only checks, orders and reports for those two layers.
# Env: DEBIAN_MIRROR (debootstrap mirror), CODEEVAL_BUILD_DIR (scratch, default .cache/images),
#      CODEEVAL_WHEELS (wheel cache, default .cache/wheels), PYTHON (host python for pip and tags).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RECIPE=containers/build.sh; source containers/lib.sh; source containers/server_layer.sh
root=$(pwd)
PYTHON=$(host_python)
command -v docker >/dev/null 2>&1 || die "docker not found: run 'make engine' (scripts/ensure-docker.sh) first."
docker info >/dev/null 2>&1 || die "the Docker engine does not answer: run 'make engine' (scripts/ensure-docker.sh) first."

base=$("$PYTHON" executors/docker/images.py base)
packages=$("$PYTHON" executors/docker/images.py packages)
image=$("$PYTHON" executors/docker/images.py python)

if exists "$image"; then
    say "$image is up to date."
    exit 0
fi

build=${CODEEVAL_BUILD_DIR:-$root/.cache/images}
wheels=${CODEEVAL_WHEELS:-$root/.cache/wheels}
mkdir -p "$build" "$wheels"
# one build at a time in this scratch folder (`make images` beside a test that builds, two checkouts)
exec 9>"$build/.lock"
if ! flock -n 9; then
    say "another build is using $build; waiting for it ..."
    flock 9
    if exists "$image"; then
        say "$image was built meanwhile."
        exit 0
    fi
fi
started=$(date +%s)

# ---- base image ---------------------------------------------------------------------
if exists "$base"; then
    say "$base exists."
else
    need_debootstrap "$base"
    # a killed or failed debootstrap leaves /proc and /sys mounted in its rootfs, which rm -rf cannot pass
    findmnt -rn -o TARGET | grep -F "$build/rootfs/" | sort -r | xargs -r -n1 umount -l || true
    say "debootstrap bookworm (minbase + python3) into $build/rootfs, docker import -> $base (about a minute) ..."
    bash containers/base/rootfs.sh "$build" "$base" >"$build/debootstrap.log" 2>&1 \
        || { tail -n 20 "$build/debootstrap.log" >&2; die "building $base failed (log: $build/debootstrap.log)"; }
fi

# ---- packages image ------------------------------------------------------------------
if exists "$packages"; then
    say "$packages exists."
else
    say "downloading, staging and byte-compiling wheels ($(grep -c '==' containers/python/requirements.txt) packages) ..."
    bash containers/python/stage.sh "$build" "$wheels" "$base" "$packages" "$PYTHON" -m pip \
        2> >(grep -v 'is ignored: it is neither' >&2) \
        || die "building $packages failed (is the package registry reachable? wheel cache: $wheels)"
fi

# ---- python image (the sandbox server) ----------------------------------------------
rm -rf "$build/server"
server_layer "$packages" "$build/server" "$image" ""
docker run --rm --network none --read-only --tmpfs /tmp "$image" \
    python3 -c 'import numpy, pandas, scipy, sklearn, matplotlib, sympy; import sys; sys.path.insert(0, "/opt/codeeval"); import docker_server' \
    || die "the new image cannot import its packages or its server"
say "built $image in $(( $(date +%s) - started ))s."
