#!/usr/bin/env bash
# Build DS-1000's execution image codeeval-ds1000:<hash> offline, on demand only (`make
# images-ds1000`; the DS-1000 tests run it): the base image (containers/build.sh builds it) + the
# wheels of containers/ds1000/requirements.txt, downloaded on the host (torch's CPU wheel from the
# local wheel directory) + the sandbox server, committed like the python image. Idempotent: a
# no-op when the tag of the current recipe exists. The tag (executors/docker/images.py) hashes this file,
# requirements.txt and the server's files. Env: as containers/build.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RECIPE=containers/ds1000/build.sh; source containers/lib.sh; source containers/server_layer.sh
root=$(pwd)
PYTHON=$(host_python)
image=$("$PYTHON" executors/docker/images.py ds1000)
if exists "$image"; then
    say "$image is up to date."
    exit 0
fi
bash containers/build.sh  # the base image (and the default python image)
base=$("$PYTHON" executors/docker/images.py base)
build=${CODEEVAL_BUILD_DIR:-$root/.cache/images}
wheels=${CODEEVAL_WHEELS:-$root/.cache/wheels}
stage=$build/ds1000
site=$stage/usr/local/lib/python3.11/dist-packages
started=$(date +%s)
mkdir -p "$wheels"
rm -rf "$stage"
mkdir -p "$site"

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

# The server layer compiles the packages too, with the image's interpreter (torch ships one test
# helper in Python 3.12 syntax, py312_intrinsics.py, left uncompiled). matplotlib needs a writable
# config dir (it ignores a read-only one): MPLCONFIGDIR is on the sandbox's /tmp. TensorFlow starts
# two threads per host core unless told (the container's --pids-limit counts them): one per pool,
# as OMP_NUM_THREADS=1 does for torch; its INFO log lines are silenced.
server_layer "$base" "$stage" "$image" \
    "MPLCONFIGDIR=/tmp/matplotlib MPLBACKEND=Agg TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 TF_CPP_MIN_LOG_LEVEL=1" \
    -x py312_intrinsics /usr/local/lib/python3.11/dist-packages
docker run --rm --network none --read-only --tmpfs /tmp "$image" python3 -c \
    'import numpy, pandas, scipy, sklearn, matplotlib.pyplot, torch, tensorflow; import sys; sys.path.insert(0, "/opt/codeeval"); import docker_server' \
    || { docker rmi "$image" >/dev/null 2>&1 || true; die "the new image cannot import its packages or its server"; }
size=$(docker image inspect --format '{{.Size}}' "$image")
say "built $image in $(( $(date +%s) - started ))s, $(( size / 1000000 )) MB."
