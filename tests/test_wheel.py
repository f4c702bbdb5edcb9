"""The package as a team installs it: a wheel (and an sdist) built from the checkout's files, the
wheel installed into a fresh venv outside the checkout, and from there: the task list, the
python image built from the recipes the wheel carries (the same tag as the checkout's: a no-op
where it exists), and HumanEval's `reference` oracle scored in Docker, 5/5."""
from __future__ import annotations

import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from docker_env import REPO, ensure_images
from wheel_env import clone, run

pytestmark = pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git checkout (its file list)")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> tuple[Path, list[str]]:
    """What a clean clone of this commit holds: git's tracked and unignored files, nothing built."""
    dest = tmp_path_factory.mktemp("clone") / "codeeval"
    return dest, clone(dest)


def test_wheel_and_sdist_hold_every_file_of_the_package(checkout, tmp_path):
    src, package_files = checkout
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path, src, cwd=tmp_path)
    run(sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(tmp_path)!r})", cwd=src)
    wheel = zipfile.ZipFile(next(tmp_path.glob("codeeval-*.whl"))).namelist()
    sdist_tar = tarfile.open(next(tmp_path.glob("codeeval-*.tar.gz")))
    sdist = {name.split("/", 1)[1] for name in sdist_tar.getnames() if "/" in name}
    missing_wheel = sorted(set(package_files) - set(wheel))
    missing_sdist = sorted(set(package_files) - sdist)
    assert not missing_wheel, f"not in the wheel: {missing_wheel}"
    assert not missing_sdist, f"not in the sdist: {missing_sdist}"
    assert {"codeeval/executors/repo/jobs.py", "codeeval/executors/multiple/harness.py",
            "codeeval/benchmarks/harness/evalplus.py", "codeeval/containers/build.sh",
            "codeeval/constraints.txt", "codeeval/flows/deployments/prefect.yaml",
            "codeeval/flows/deployments/models.yaml"} <= set(wheel)
    # one list of tested versions: the checkout's constraints.txt is the file the wheel carries
    assert (src / "constraints.txt").resolve() == (src / "codeeval" / "constraints.txt").resolve()
    print(f"wheel: {len(wheel)} files; sdist: {len(sdist)} files")


def test_the_installed_wheel_runs_outside_the_checkout(checkout, tmp_path, data_dir):
    src, _ = checkout
    checkout_image = ensure_images()
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", dist, src, cwd=tmp_path)
    venv = tmp_path / "fresh"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q"]
    run(*pip, "torch==2.13.0", cwd=tmp_path)  # first and pinned: pip never resolves an unpinned torch
    run(*pip, "-c", src / "constraints.txt", next(dist.glob("codeeval-*.whl")), cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    codeeval = venv / "bin" / "codeeval"
    where = run(venv / "bin" / "python", "-c", "import codeeval; print(codeeval.__file__)", cwd=elsewhere, env=env)
    assert where.stdout.strip().startswith(str(venv)), where.stdout  # not the checkout

    tasks = run(codeeval, "tasks", cwd=elsewhere, env=env).stdout
    for name in ("humaneval", "multiple-rs", "ds1000-numpy-completion", "apps-interview", "deveval", "mbppplus"):
        assert f"\n{name} " in "\n" + tasks, name
    built = run(codeeval, "images", "build", "--runtime", "python", cwd=elsewhere, env=env)
    assert checkout_image in built.stdout + built.stderr, built.stderr  # the wheel's recipes: the same tag
    tags = run(codeeval, "images", "tags", cwd=elsewhere, env=env).stdout
    assert checkout_image in tags

    out = elsewhere / "runs" / "wheel"
    run(codeeval, "run", "--model", "reference", "--tasks", "humaneval", "--limit", "5", "--allow_code_execution",
        "--output_dir", out, cwd=elsewhere, env=env)
    scores = json.loads((out / "humaneval" / "metrics.json").read_text())
    assert scores["metrics"]["pass@1"] == 1.0 and scores["problems"] == 5, scores
