#!/usr/bin/env bash
# Recipe of the base image: a minimal Debian bookworm with python3, made by debootstrap.
# Usage: rootfs.sh ROOTFS_DIR   (run as root; containers/build.sh imports the result)
set -euo pipefail
rootfs=$1
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$mirror"

# Trim what a sandbox never needs (apt lists and caches, docs, man pages, locales).
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true

# Unprivileged users for the sandbox: one uid per worker slot (10000 + slot), so that
# RLIMIT_NPROC, which the kernel counts per uid, is never shared between containers.
for i in $(seq 0 127); do
    echo "sandbox$i:x:$((10000 + i)):$((10000 + i)):sandbox:/tmp:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
    echo "sandbox$i:x:$((10000 + i)):" >>"$rootfs/etc/group"
done
