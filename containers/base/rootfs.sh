#!/usr/bin/env bash
# Recipe of the base image: a minimal Debian bookworm with python3, made by debootstrap and
# imported as TAG. Every step that shapes the image is in this file, which
# executors/images.py hashes into TAG (containers/build.sh only decides whether to run it).
# Usage: rootfs.sh WORK_DIR TAG   (run as root; WORK_DIR/rootfs is scratch)
set -euo pipefail
work=$1; tag=$2
rootfs=$work/rootfs
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

rm -rf "$rootfs"
debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$mirror"

# Trim what a sandbox never needs (apt lists and caches, docs, man pages, locales).
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
       "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true

# Unprivileged users for the sandbox: one uid per worker slot (10000 + slot % 128), so that
# the containers of one sandbox never share a uid. (Process counts are bounded by each
# container's --pids-limit, not by the per-uid RLIMIT_NPROC: see docs/security.md.)
for i in $(seq 0 127); do
    echo "sandbox$i:x:$((10000 + i)):$((10000 + i)):sandbox:/tmp:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
    echo "sandbox$i:x:$((10000 + i)):" >>"$rootfs/etc/group"
done

echo "docker import -> $tag"
tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change "LABEL codeeval.recipe=$tag" \
    --change 'CMD ["python3"]' - "$tag" >/dev/null
rm -rf "$rootfs"
