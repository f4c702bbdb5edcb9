"""Stage artifacts through an fsspec URL: CODEEVAL_STORAGE=s3://bucket/prefix (or gs://, file://,
any protocol whose fsspec package is installed) instead of a filesystem every host mounts alike.

Each host keeps a local mirror of the store under $CODEEVAL_CACHE/storage/mirror-<digest of the
URL>; run directories live there (runs/<run_id> becomes <mirror>/<run_id>). Every artifact is
written locally first (atomically, as always) and then put in the store; a reader whose local
copy is missing gets it from the store. A path that another host sent (a stage's parameters)
names that host's mirror: `localize` rebases it onto this host's, at the mirror-<digest>
component. Without a URL in CODEEVAL_STORAGE every function here does nothing.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

from codeeval.core import files
from codeeval.core.cache import cache_root
from codeeval.core.fingerprint import digest


def url(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """CODEEVAL_STORAGE when it is a URL (an fsspec store), else None."""
    value = (os.environ if env is None else env).get("CODEEVAL_STORAGE", "")
    return value.rstrip("/") if "://" in value else None


def _marker(store: str) -> str:
    return f"mirror-{digest('codeeval-storage', store)[:12]}"


def mirror_root(store: str) -> Path:
    """Where this host keeps its copy of the store's run directories."""
    return cache_root() / "storage" / _marker(store)


def localize(path: str) -> str:
    """`path` from another host's mirror, as the same file in this host's mirror."""
    store = url()
    if store is None or not isinstance(path, str):
        return path
    parts = Path(path).parts
    marker = _marker(store)
    if marker not in parts:
        return path
    return str(mirror_root(store).joinpath(*parts[parts.index(marker) + 1:]))


def _remote(path: Path) -> Optional[tuple[object, str]]:
    store = url()
    if store is None:
        return None
    try:
        rel = Path(os.path.abspath(path)).relative_to(mirror_root(store).absolute())
    except ValueError:
        return None  # not under the mirror (an explicit --output_dir): local only
    import fsspec

    fs, root = fsspec.core.url_to_fs(store)
    return fs, f"{root.rstrip('/')}/{rel.as_posix()}"


def publish(path: Path) -> None:
    """Put a finished local artifact in the store (a no-op without a store)."""
    if (remote := _remote(path)) is not None:
        fs, key = remote
        fs.makedirs(key.rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(str(path), key)


def url_problem(target: str) -> Optional[str]:
    """Why the URL `target` cannot be written (a protocol fsspec does not know, or whose package is
    not installed), in one line; None when it can."""
    import fsspec

    try:
        fsspec.core.url_to_fs(target)
    except (ImportError, ValueError) as exc:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return None


def write_url(target: str, data: bytes) -> str:
    """`data` as the file at the URL `target`: an output the user named by URL (--metric_output_path
    s3://bucket/m.json) goes there as given, through no mirror."""
    import fsspec

    fs, key = fsspec.core.url_to_fs(target)
    if "/" in key.rstrip("/"):
        fs.makedirs(key.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(key, "wb") as fh:
        fh.write(data)
    return target


def remove(path: Path) -> None:
    """Take the file or folder `path` out of the store too (a no-op without a store, or where it holds
    none): what a host prunes must not come back to the next host that fetches."""
    if (remote := _remote(path)) is not None:
        fs, key = remote
        if fs.exists(key):
            fs.rm(key, recursive=True)


def folders(path: Path) -> list[Path]:
    """The folders the store holds directly under the folder `path` (other hosts' too), as this host's
    paths; [] without a store."""
    if (remote := _remote(path)) is None:
        return []
    fs, key = remote
    if not fs.isdir(key):
        return []
    return [path / info["name"].rstrip("/").rsplit("/", 1)[-1] for info in fs.ls(key, detail=True)
            if info.get("type") == "directory"]


def fetch(path: Path) -> Path:
    """`path`, copied from the store first when this host has no copy and the store has one."""
    path = Path(path)
    if path.exists() or (remote := _remote(path)) is None:
        return path
    fs, key = remote
    if not fs.exists(key):
        return path
    return files.write_atomically(path, lambda tmp: fs.get_file(key, tmp))


def refresh(path: Path) -> Path:
    """`path` as the store holds it now, when it holds one: for a file that every night rewrites
    (leaderboard.parquet), whose copy on this host may be of a night an other host has since followed."""
    path = Path(path)
    if (remote := _remote(path)) is not None:
        fs, key = remote
        if fs.exists(key):
            return files.write_atomically(path, lambda tmp: fs.get_file(key, tmp))
    return path


def fetch_dir(path: Path) -> Path:
    """Every file the store has under the folder `path` that this host lacks or holds shorter (files
    that other hosts append to, e.g. the request journal's); a no-op without a store."""
    if (remote := _remote(path)) is not None:
        fs, key = remote
        if fs.isdir(key):
            for info in fs.find(key, detail=True).values():
                local = path / Path(info["name"]).relative_to(key)
                if not local.exists() or local.stat().st_size < (info.get("size") or 0):
                    files.write_atomically(local, lambda tmp, name=info["name"]: fs.get_file(name, tmp))
    return path


def root(env: Optional[Mapping[str, str]] = None) -> Path:
    """Where the runs of this storage live on this host: under CODEEVAL_STORAGE (a path every host
    sees alike, or this host's mirror of a URL), else runs/. Files that every run under it shares,
    such as the request journal, go here too. ``env``: another environment than this process's."""
    env = os.environ if env is None else env
    store = url(env)
    return mirror_root(store) if store else Path(env.get("CODEEVAL_STORAGE") or "runs")


def shared(name: str) -> Path:
    """A folder that runs share, such as the nightly's leaderboard: under CODEEVAL_STORAGE (root()) when
    it is set, so that no worker writes it into its working directory; else `name` in the working directory."""
    return root() / name if os.environ.get("CODEEVAL_STORAGE") else Path(name)


def run_dir(run_id: str) -> Path:
    """Where the run `run_id` lives on this host when no --output_dir names it."""
    return root() / run_id


def fetch_run(root: Path) -> Path:
    """The run directory `root` with every file the store has of it (`codeeval inspect` on a host
    that did not run it); a no-op without a store."""
    if (remote := _remote(root)) is not None:
        fs, key = remote
        if fs.isdir(key):
            for path in fs.find(key):
                fetch(root / Path(path).relative_to(key))
    return root


def locate(run: str) -> Path:
    """A run as the command line names it (`codeeval inspect`, `codeeval compare`): a directory,
    or a run id under run_dir(), with every file the store has of it."""
    return Path(run) if Path(run).is_dir() or os.sep in run else fetch_run(run_dir(run))
