#!/usr/bin/env bash
# Recipe of a MultiPL-E toolchain image: Debian SUITE minbase + python3 (the sandbox server)
# + the packages listed in PACKAGES, installed in a chroot with no recommends, imported as TAG.
# Every step that shapes the image is in this file or PACKAGES, which executors/docker/images.py
# hashes into TAG (containers/build.sh only decides whether to run it).
# Usage: rootfs.sh WORK_DIR SUITE PACKAGES TAG   (run as root; WORK_DIR/rootfs-SUITE is scratch)
set -euo pipefail
RECIPE=containers/multiple/rootfs.sh; source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
work=$1; suite=$2; list=$3; tag=$4
rootfs=$work/rootfs-$suite
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mapfile -t pkgs < <(grep -v '^\s*#' "$list" | grep -v '^\s*$')

cleanup() { umount "$rootfs/proc" 2>/dev/null || true; }
trap cleanup EXIT
rm -rf "$rootfs"
debootstrap --variant=minbase --include=python3 "$suite" "$rootfs" "$mirror"
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"; chmod +x "$rootfs/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
mount -t proc proc "$rootfs/proc"
# A clean environment inside the chroot: the host's TMPDIR or HOME (CI points them into the
# checkout) do not exist there, and maintainer scripts (ca-certificates) fail on them.
in_root() { chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp \
    DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
in_root apt-get clean
umount "$rootfs/proc"
rm -f "$rootfs/usr/sbin/policy-rc.d" "$rootfs/etc/resolv.conf"

# MultiPL-E's Java runner expects javatuples at a fixed path; Debian installs the same 1.2 jar.
if [ -e "$rootfs/usr/share/java/javatuples.jar" ]; then
    mkdir -p "$rootfs/usr/multiple"
    ln -sf /usr/share/java/javatuples.jar "$rootfs/usr/multiple/javatuples-1.2.jar"
fi

import_rootfs "$rootfs" "$tag"
