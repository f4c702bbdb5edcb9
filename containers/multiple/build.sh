#!/usr/bin/env bash
# Build the MultiPL-E execution images offline (`make images` runs this after containers/build.sh).
# Idempotent: a no-op when the images tagged with the current recipe's hash exist.
#
#   codeeval-multiple-<suite>-toolchains:<hash>  Debian <suite> minbase + python3 + the toolchains in
#                           containers/multiple/<suite>.txt (recipe: containers/multiple/rootfs.sh)
#   codeeval-multiple-<suite>:<hash>  the toolchains + the sandbox server, non-root user (recipe: this
#                           file, executors/runner.py, executors/cputime.py, executors/docker_server.py)
#
# Suites: bookworm (20 languages), trixie (Swift only: bookworm has none). Julia has no image.
# Env: CODEEVAL_MULTIPLE_SUITES (default "bookworm trixie"), CODEEVAL_BUILD_DIR, PYTHON, DEBIAN_MIRROR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$(pwd)

say() { echo "containers/multiple/build.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

if [ -z "${PYTHON:-}" ]; then
    if [ -x "$root/.venv/bin/python" ]; then PYTHON=$root/.venv/bin/python; else PYTHON=python3; fi
fi
docker info >/dev/null 2>&1 || die "the Docker engine does not answer: run 'make engine' first."
exists() { docker image inspect "$1" >/dev/null 2>&1; }
build=${CODEEVAL_BUILD_DIR:-$root/.cache/images}
mkdir -p "$build"

suites=(${CODEEVAL_MULTIPLE_SUITES:-bookworm trixie})
started=$(date +%s)

# ---- toolchain layers: the suites that need one are built at the same time (mostly download and unpack)
pids=(); building=()
for suite in "${suites[@]}"; do
    tools=$("$PYTHON" executors/images.py "multiple-$suite-toolchains")
    image=$("$PYTHON" executors/images.py "multiple-$suite")
    if exists "$image" || exists "$tools"; then
        continue
    fi
    [ "$(id -u)" = 0 ] || die "building $tools needs root (debootstrap, chroot); run 'sudo make images'."
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "installing Debian's debootstrap ..."
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
            || die "apt-get install debootstrap failed"
    fi
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
    tools=$("$PYTHON" executors/images.py "multiple-$suite-toolchains")
    image=$("$PYTHON" executors/images.py "multiple-$suite")
    if exists "$image"; then
        say "$image is up to date."
        continue
    fi
    tmp=codeeval-build-multiple-$$
    stage=$build/server-multiple
    rm -rf "$stage"; mkdir -p "$stage/opt/codeeval"
    cp executors/runner.py executors/cputime.py executors/docker_server.py "$stage/opt/codeeval/"
    docker create --name "$tmp" --network none "$tools" python3 -m compileall -q /opt/codeeval >/dev/null
    docker cp "$stage/." "$tmp:/"
    docker start -a "$tmp" >/dev/null || { docker rm -f "$tmp" >/dev/null; die "byte-compiling the server failed"; }
    docker commit \
        --change 'USER 10000:10000' \
        --change 'WORKDIR /tmp' \
        --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
        --change "LABEL codeeval.recipe=$image" \
        --change 'CMD ["python3", "-I", "/opt/codeeval/docker_server.py"]' \
        "$tmp" "$image" >/dev/null
    docker rm -f "$tmp" >/dev/null
    rm -rf "$stage"
    say "built $image ($(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.2f GB", $1/1e9}')); $(( $(date +%s) - started ))s since the start."
done
