#!/usr/bin/env bash
# Recipe of the packages image: BASE + the wheels of requirements.txt installed for the
# image's interpreter (CPython 3.11, manylinux x86_64), byte-compiled, committed as TAG.
# Every step that shapes the image is in this file or requirements.txt, which
# executors/docker/images.py hashes into TAG (containers/build.sh only decides whether to run it).
# Usage: stage.sh WORK_DIR WHEEL_DIR BASE TAG PIP...   (WORK_DIR/stage is scratch)
# Containers cannot reach the package registry: wheels are downloaded here, on the host.
set -euo pipefail
work=$1; wheels=$2; base=$3; tag=$4; shift 4
pip=("$@")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
stage=$work/stage
tmp=codeeval-build-packages-$$
trap 'docker rm -f "$tmp" >/dev/null 2>&1 || true' EXIT

target=(--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)

rm -rf "$stage"
mkdir -p "$stage"
"${pip[@]}" download --quiet --disable-pip-version-check "${target[@]}" -d "$wheels" -r "$here/requirements.txt"
"${pip[@]}" install --quiet --disable-pip-version-check --no-index --find-links "$wheels" "${target[@]}" \
    --no-deps --no-warn-conflicts --no-compile --target "$stage/usr/local/lib/python3.11/dist-packages" -r "$here/requirements.txt"
rm -rf "$stage/usr/local/lib/python3.11/dist-packages/bin"

# Byte-compile with the image's own interpreter: the sandbox's root file system is read-only.
docker create --name "$tmp" --network none "$base" \
    python3 -m compileall -q -j 0 /usr/local/lib/python3.11/dist-packages >/dev/null
docker cp "$stage/." "$tmp:/"
docker start -a "$tmp" >/dev/null || { echo "byte-compiling in the image failed" >&2; exit 1; }
echo "docker commit -> $tag" >&2
docker commit --change "LABEL codeeval.recipe=$tag" "$tmp" "$tag" >/dev/null
docker rm -f "$tmp" >/dev/null
rm -rf "$stage"
