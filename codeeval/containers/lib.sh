# Shell functions the image recipes source (containers/build.sh, multiple/*.sh, ds1000/build.sh,
# base/rootfs.sh). executors/docker/images.py hashes this file into the root-file-system tags (base,
# MultiPL-E toolchains), so a changed step here rebuilds every image; the server layer's step is
# in server_layer.sh, so that a change there rebuilds in seconds. Callers set RECIPE (their name
# in messages) and run from the repository root.

say() { echo "${RECIPE:-containers}: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
exists() { docker image inspect "$1" >/dev/null 2>&1; }

# The host Python that downloads wheels and computes tags: the project's venv when it has one.
host_python() {
    if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"
    elif [ -x "$(pwd)/.venv/bin/python" ]; then echo "$(pwd)/.venv/bin/python"
    else echo python3; fi
}

# debootstrap (and root) for building TAG from a Debian root file system.
need_debootstrap() {
    [ "$(id -u)" = 0 ] || die "building $1 needs root (debootstrap, chroot); run 'sudo make images'."
    command -v debootstrap >/dev/null 2>&1 && return 0
    say "installing Debian's debootstrap ..."
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
        || die "apt-get install debootstrap failed"
}

# Trim what a sandbox never needs from ROOTFS, add the sandbox users (one uid per worker slot,
# 10000 + slot % 128, so that the containers of one sandbox never share a uid; process counts
# are bounded by --pids-limit, not RLIMIT_NPROC: docs/security.md) and import it as TAG.
import_rootfs() {
    local rootfs=$1 tag=$2 i
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
           "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
           "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
    find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
    for i in $(seq 0 127); do
        echo "sandbox$i:x:$((10000 + i)):$((10000 + i)):sandbox:/tmp:/usr/sbin/nologin" >>"$rootfs/etc/passwd"
        echo "sandbox$i:x:$((10000 + i)):" >>"$rootfs/etc/group"
    done
    echo "docker import -> $tag"
    tar --numeric-owner -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change "LABEL codeeval.recipe=$tag" \
        --change 'CMD ["python3"]' - "$tag" >/dev/null
    rm -rf "$rootfs"
}
