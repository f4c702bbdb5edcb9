#!/usr/bin/env bash
# Recipe of the packages layer: the wheels of requirements.txt installed for the image's
# interpreter (CPython 3.11, manylinux x86_64).
# Usage: stage.sh STAGE_DIR WHEEL_DIR PIP...   (STAGE_DIR is copied onto the base image's /)
# Containers cannot reach the package registry: wheels are downloaded here, on the host.
set -euo pipefail
stage=$1; wheels=$2; shift 2
pip=("$@")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

target=(--only-binary=:all: --implementation cp --python-version 3.11 --abi cp311
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)

"${pip[@]}" download --quiet --disable-pip-version-check "${target[@]}" -d "$wheels" -r "$here/requirements.txt"
"${pip[@]}" install --quiet --disable-pip-version-check --no-index --find-links "$wheels" "${target[@]}" \
    --no-deps --no-warn-conflicts --no-compile --target "$stage/usr/local/lib/python3.11/dist-packages" -r "$here/requirements.txt"
rm -rf "$stage/usr/local/lib/python3.11/dist-packages/bin"
