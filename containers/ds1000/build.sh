#!/usr/bin/env bash
# Build DS-1000's execution image codeeval-ds1000:<hash> offline, on demand only (`make
# images-ds1000`; the DS-1000 tests run it): the base image (containers/build.sh builds it) + the
# wheels of containers/ds1000/requirements.txt, downloaded on the host (torch's CPU wheel from the
# local wheel directory) + the sandbox server, committed like the python image. Idempotent: a
# no-op when the tag of the current recipe exists. The tag (executors/images.py) hashes this file,
# requirements.txt and the server's files. Env: as containers/build.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$(pwd)
say() { echo "containers/ds1000/build.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$root/.venv/bin/python" ]; then PYTHON=$root/.venv/bin/python; else PYTHON=python3; fi
fi
exists() { docker image inspect "$1" >/dev/null 2>&1; }
image=$("$PYTHON" executors/images.py ds1000)
if exists "$image"; then
    say "$image is up to date."
    exit 0
fi
bash containers/build.sh  # the base image (and the default python image)
base=$("$PYTHON" executors/images.py base)
build=${CODEEVAL_BUILD_DIR:-$root/.cache/images}
wheels=${CODEEVAL_WHEELS:-$root/.cache/wheels}
stage=$build/ds1000
site=$stage/usr/local/lib/python3.11/dist-packages
tmp=codeeval-build-ds1000-$$
trap 'docker rm -f "$tmp" >/dev/null 2>&1 || true' EXIT
started=$(date +%s)
mkdir -p "$wheels"
rm -rf "$stage"
mkdir -p "$site" "$stage/opt/codeeval"

target=(--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
say "downloading and staging wheels ($(grep -c '==' containers/ds1000/requirements.txt) packages) ..."
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps "${target[@]}" -d "$wheels" \
    -r containers/ds1000/requirements.txt 2> >(grep -v 'is ignored: it is neither' >&2) \
    || die "downloading the wheels failed (is the package registry reachable? wheel cache: $wheels)"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$wheels" "${target[@]}" \
    --no-deps --no-warn-conflicts --no-compile --target "$site" -r containers/ds1000/requirements.txt \
    2> >(grep -v 'is ignored: it is neither' >&2) || die "staging the wheels failed"
rm -rf "$site/bin"
cp executors/runner.py executors/cputime.py executors/docker_server.py "$stage/opt/codeeval/"

# Byte-compile with the image's interpreter: its root file system is read-only in the sandbox (torch
# ships one test helper in Python 3.12 syntax, py312_intrinsics.py, left uncompiled). matplotlib
# needs a writable config dir (it ignores a read-only one): MPLCONFIGDIR is on the sandbox's /tmp.
# TensorFlow starts two threads per host core unless told (the container's --pids-limit counts
# them): one per pool, as OMP_NUM_THREADS=1 does for torch; its INFO log lines are silenced.
docker create --name "$tmp" --network none "$base" \
    python3 -m compileall -q -j 0 -x py312_intrinsics /usr/local/lib/python3.11/dist-packages /opt/codeeval >/dev/null
docker cp "$stage/." "$tmp:/"
docker start -a "$tmp" >/dev/null || die "byte-compiling in the image failed"
say "docker commit -> $image"
docker commit \
    --change 'USER 10000:10000' \
    --change 'WORKDIR /tmp' \
    --change 'ENV PYTHONDONTWRITEBYTECODE=1 MPLCONFIGDIR=/tmp/matplotlib MPLBACKEND=Agg TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 TF_CPP_MIN_LOG_LEVEL=1' \
    --change "LABEL codeeval.recipe=$image" \
    --change 'CMD ["python3", "-I", "/opt/codeeval/docker_server.py"]' \
    "$tmp" "$image" >/dev/null
docker rm -f "$tmp" >/dev/null
rm -rf "$stage"
docker run --rm --network none --read-only --tmpfs /tmp "$image" python3 -c \
    'import numpy, pandas, scipy, sklearn, matplotlib.pyplot, torch, tensorflow; import sys; sys.path.insert(0, "/opt/codeeval"); import docker_server' \
    || { docker rmi "$image" >/dev/null 2>&1 || true; die "the new image cannot import its packages or its server"; }
size=$(docker image inspect --format '{{.Size}}' "$image")
say "built $image in $(( $(date +%s) - started ))s, $(( size / 1000000 )) MB."
