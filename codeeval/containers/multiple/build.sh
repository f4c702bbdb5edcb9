#!/usr/bin/env bash
# Build the MultiPL-E execution images offline (`make images` runs this after containers/build.sh).
# Idempotent: a no-op when the images tagged with the current recipe's hash exist.
#
#   codeeval-multiple-<suite>-toolchains:<hash>  Debian <suite> minbase + python3 + the toolchains in
#                           containers/multiple/<suite>.txt (recipe: containers/multiple/rootfs.sh)
#   codeeval-multiple-<suite>:<hash>  the toolchains + the sandbox server, non-root user (recipe: this
#                           file, executors/runner.py, executors/cputime/, executors/docker/inside/)
#
# Suites: bookworm (20 languages), trixie (Swift only: bookworm has none). Julia has no image.
# Env: CODEEVAL_MULTIPLE_SUITES (default "bookworm trixie"), CODEEVAL_BUILD_DIR, PYTHON, DEBIAN_MIRROR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RECIPE=containers/multiple/build.sh; source containers/lib.sh; source containers/server_layer.sh
root=$(pwd)
PYTHON=$(host_python)
docker info >/dev/null 2>&1 || die "the Docker engine does not answer: run 'make engine' first."
build=${CODEEVAL_BUILD_DIR:-$root/.cache/images}
mkdir -p "$build"

suites=(${CODEEVAL_MULTIPLE_SUITES:-bookworm trixie})
started=$(date +%s)

# ---- toolchain layers: the suites that need one are built at the same time (mostly download and unpack)
pids=(); building=()
for suite in "${suites[@]}"; do
    tools=$("$PYTHON" executors/docker/images.py "multiple-$suite-toolchains")
    image=$("$PYTHON" executors/docker/images.py "multiple-$suite")
    if exists "$image" || exists "$tools"; then
        continue
    fi
    need_debootstrap "$tools"
    say "debootstrap $suite + $(grep -cv '^\s*\(#\|$\)' containers/multiple/$suite.txt) toolchain packages -> $tools (minutes; log: $build/multiple-$suite.log) ..."
    bash containers/multiple/rootfs.sh "$build" "$suite" "containers/multiple/$suite.txt" "$tools" \
        >"$build/multiple-$suite.log" 2>&1 &
    pids+=($!); building+=("$suite")
done
failed=()
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=("${building[$i]}")
done
for suite in "${failed[@]}"; do
    tail -n 20 "$build/multiple-$suite.log" >&2
    say "ERROR: building the $suite toolchains failed (log: $build/multiple-$suite.log)"
done
[ ${#failed[@]} = 0 ] || exit 1

# ---- server layers: the sandbox server, as in the python image (containers/build.sh)
for suite in "${suites[@]}"; do
    tools=$("$PYTHON" executors/docker/images.py "multiple-$suite-toolchains")
    image=$("$PYTHON" executors/docker/images.py "multiple-$suite")
    if exists "$image"; then
        say "$image is up to date."
        continue
    fi
    rm -rf "$build/server-multiple"
    server_layer "$tools" "$build/server-multiple" "$image" ""
    say "built $image ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.2f GB", $1/1e9}')); $(( $(date +%s) - started ))s since the start."
done
