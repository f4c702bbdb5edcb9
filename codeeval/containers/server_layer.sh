# Sourced by the image recipes after containers/lib.sh; executors/docker/images.py hashes it into the
# tags of the images with a sandbox server (python, ds1000, multiple-<suite>).

# The sandbox server layer: FROM + STAGE's files + the server's files under /opt/codeeval,
# byte-compiled with the image's own interpreter (the sandbox's root is read-only), committed
# as TAG running the server as a non-root user. STAGE may hold more files (site-packages); ENV:
# extra `KEY=VALUE ...` for the image; the remaining arguments go to compileall (paths, -x).
server_layer() {
    local from=$1 stage=$2 tag=$3 env="PYTHONDONTWRITEBYTECODE=1${4:+ $4}"
    shift 4
    _layer=codeeval-build-$$-$RANDOM
    trap 'docker rm -f "$_layer" >/dev/null 2>&1 || true' EXIT
    local tmp=$_layer
    mkdir -p "$stage/opt/codeeval/cputime"  # the files images.py's SERVER_FILES hashes, by the same globs
    cp executors/runner.py executors/docker/inside/server_*.py "$stage/opt/codeeval/"
    cp executors/cputime/*.py "$stage/opt/codeeval/cputime/"
    cp executors/docker/inside/server.py "$stage/opt/codeeval/docker_server.py"
    docker create --name "$tmp" --network none "$from" python3 -m compileall -q -j 0 "$@" /opt/codeeval >/dev/null
    docker cp "$stage/." "$tmp:/"
    docker start -a "$tmp" >/dev/null || { docker rm -f "$tmp" >/dev/null; die "byte-compiling in $tag failed"; }
    say "docker commit -> $tag"
    docker commit \
        --change 'USER 10000:10000' \
        --change 'WORKDIR /tmp' \
        --change "ENV $env" \
        --change "LABEL codeeval.recipe=$tag" \
        --change 'CMD ["python3", "-I", "/opt/codeeval/docker_server.py"]' \
        "$tmp" "$tag" >/dev/null
    docker rm -f "$tmp" >/dev/null
    rm -rf "$stage"
}
