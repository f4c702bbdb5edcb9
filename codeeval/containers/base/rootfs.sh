#!/usr/bin/env bash
# Recipe of the base image: a minimal Debian bookworm with python3, made by debootstrap and
# imported as TAG. Every step that shapes the image is in this file, which
# executors/docker/images.py hashes into TAG (containers/build.sh only decides whether to run it).
# Usage: rootfs.sh WORK_DIR TAG   (run as root; WORK_DIR/rootfs is scratch)
set -euo pipefail
RECIPE=containers/base/rootfs.sh; source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
work=$1; tag=$2
rootfs=$work/rootfs
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

rm -rf "$rootfs"
debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$mirror"

import_rootfs "$rootfs" "$tag"
