"""Cache keys name what a shard depends on, never where it is: a run directory moved with its
checkout, or a repo-level data set whose Source_Code lives elsewhere on another host (another
path, another cache where its tarballs are extracted), reuses every finished shard and gives the
same numbers."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from docker_env import ensure_images


def codeeval(*args, cwd: Path, cache: Path) -> str:
    env = {**os.environ, "CODEEVAL_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-m", "codeeval", "run", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def reused(stdout: str) -> str:
    return stdout.split("reused ", 1)[1].split("\n", 1)[0]


def test_a_moved_run_directory_reuses_its_shards(tmp_path, data_dir):
    first, moved = tmp_path / "checkout", tmp_path / "elsewhere" / "checkout"
    first.mkdir()
    args = ["--model", "reference", "--tasks", "humaneval,mbpp", "--limit", "4", "--shard_size", "2",
            "--allow_code_execution", "--executor", "local", "--data-dir", data_dir]
    codeeval(*args, "--output-dir", "runs/r", cwd=first, cache=tmp_path / "cache")
    before = json.loads((first / "runs/r/results.json").read_text())
    moved.parent.mkdir()
    first.rename(moved)
    out = codeeval(*args, "--output-dir", "runs/r", cwd=moved, cache=tmp_path / "cache")
    assert reused(out) == "2/2 generation and 2/2 execution shards", out
    after = json.loads((moved / "runs/r/results.json").read_text())
    assert {t: after[t] for t in ("humaneval", "mbpp")} == {t: before[t] for t in ("humaneval", "mbpp")}


def test_repo_level_source_code_elsewhere_reuses_its_shards(tmp_path, data_dir):
    """DevEval's real projects: the data set copied to another path and extracted into another
    cache (what a second host sees) -> the same shards, the same pass@1 and Recall@1."""
    ensure_images()
    host_a, host_b = tmp_path / "host-a" / "data", tmp_path / "host-b" / "data"
    shutil.copytree(data_dir / "deveval", host_a / "deveval", ignore=shutil.ignore_patterns("released"))
    run = tmp_path / "shared-runs" / "deveval"
    args = ["--model", "reference", "--tasks", "deveval", "--limit", "4", "--shard_size", "2",
            "--allow_code_execution", "--output-dir", run]
    codeeval(*args, "--data-dir", host_a, cwd=tmp_path, cache=tmp_path / "host-a" / "cache")
    before = json.loads((run / "results.json").read_text())["deveval"]
    shutil.copytree(host_a, host_b)
    shutil.rmtree(host_a.parent)  # host a's paths and cache are gone
    out = codeeval(*args, "--data-dir", host_b, cwd=tmp_path, cache=tmp_path / "host-b" / "cache")
    assert reused(out) == "2/2 generation and 2/2 execution shards", out
    after = json.loads((run / "results.json").read_text())["deveval"]
    assert after == before and before["pass@1"] == 1.0
