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

import pytest
from docker_env import REPO, ensure_images
from wheel_env import clone, run

pytestmark = pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git checkout (its file list)")


def test_wheel_and_sdist_hold_every_file_of_the_package(built_wheel, tmp_path):
    package_files = built_wheel.package_files
    src = tmp_path / "clone"  # a clean clone of its own: building the sdist writes into the tree
    assert clone(src) == package_files
    run(sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(tmp_path)!r})", cwd=src)
    wheel = zipfile.ZipFile(built_wheel.path).namelist()
    sdist_tar = tarfile.open(next(tmp_path.glob("codeeval-*.tar.gz")))
    sdist = {name.split("/", 1)[1] for name in sdist_tar.getnames() if "/" in name}
    missing_wheel = sorted(set(package_files) - set(wheel))
    missing_sdist = sorted(set(package_files) - sdist)
    assert not missing_wheel, f"not in the wheel: {missing_wheel}"
    assert not missing_sdist, f"not in the sdist: {missing_sdist}"
    assert {"codeeval/executors/repo/jobs.py", "codeeval/benchmarks/multiple/harness.py",
            "codeeval/benchmarks/evalplus/harness.py", "codeeval/containers/build.sh",
            "codeeval/constraints.txt", "codeeval/flows/deployments/prefect.yaml",
            "codeeval/flows/deployments/models.yaml", "codeeval/reporting/view/app.js",
            "codeeval/reporting/view/shell.html"} <= set(wheel)
    # one list of tested versions: the checkout's constraints.txt is the file the wheel carries
    assert (src / "constraints.txt").resolve() == (src / "codeeval" / "constraints.txt").resolve()
    print(f"wheel: {len(wheel)} files; sdist: {len(sdist)} files")


def test_the_installed_wheel_runs_outside_the_checkout(installed_wheel, tmp_path, data_dir):
    checkout_image = ensure_images()
    venv = installed_wheel.venv  # torch first, then the wheel with the constraints it carries (docs' section 1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    codeeval = venv / "bin" / "codeeval"
    where = installed_wheel.imported_from(elsewhere)
    assert where.startswith(str(venv) + "/"), where  # not the checkout

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
    # the page of every sample, from the files the wheel carries (app.js, app.css, the shell)
    assert {p.name for p in (out / "view").iterdir()} == {"index.html", "app.js", "app.css", "data"}
    assert "codeevalView" in (out / "view" / "app.js").read_text()
