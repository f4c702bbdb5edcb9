"""What the tests leave behind: files created in the repository by one sample's test run are
removed before the next sample (folders stay), so that no verdict depends on an earlier sample (sqlitedict's
tests leave `tests/db/*.sqlite`, which later runs of the same tests then reuse). Only new paths
are removed; a file that existed before is never touched (the patched one is restored by the
journal). A tree extracted by codeeval carries a manifest of its pristine paths, so leftovers
of an earlier run go too."""
from __future__ import annotations

import json
import os
from pathlib import Path

MANIFEST = ".codeeval-manifest.json"  # at the root of a Source_Code tree codeeval extracted


def listing(project_dir: Path) -> set[str]:
    paths = set()
    for dirpath, dirnames, filenames in os.walk(project_dir):
        rel = os.path.relpath(dirpath, project_dir)
        for name in dirnames + filenames:
            paths.add(os.path.normpath(os.path.join(rel, name)))
    return paths


def write_manifest(root: Path) -> None:
    (root / MANIFEST).write_text(json.dumps(sorted(listing(root))))


def baseline(root: Path, project: str) -> set[str]:
    """The paths that belong to the project: the manifest's (an extracted tree) or what is there now."""
    project_dir = root / project
    if (root / MANIFEST).is_file():
        prefix = project.rstrip("/") + "/"
        return {p[len(prefix):] for p in json.loads((root / MANIFEST).read_text()) if p.startswith(prefix)}
    return listing(project_dir)


def sweep(project_dir: Path, keep: set[str]) -> list[str]:
    """Remove every file under project_dir not in `keep`; returns what was removed. New folders
    stay (emptied): some test suites need a folder that only their other tests create
    (sqlitedict's `tests/db`, which DevEval's archive evidently holds: its ground truth for
    `SqliteDict.terminate` passes only with it)."""
    removed = []
    for dirpath, dirnames, filenames in os.walk(project_dir):
        rel = os.path.relpath(dirpath, project_dir)
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            path = os.path.normpath(os.path.join(rel, name))
            if path not in keep:
                (project_dir / path).unlink(missing_ok=True)
                removed.append(path)
    return removed
