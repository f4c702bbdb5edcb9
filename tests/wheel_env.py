"""The package as a team gets it, shared by tests/test_wheel.py and tests/test_team_package.py: a
clean clone of this commit (git's tracked and unignored files, nothing built) and the wheel built
from it, with nothing of the checkout's environment leaking into what runs the wheel."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from docker_env import REPO


def run(*cmd, cwd: Path, env=None, timeout=900) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def clone(dest: Path) -> list[str]:
    """What a clean clone of this commit holds, copied to dest; the package's files among them."""
    files = run("git", "ls-files", "-co", "--exclude-standard", cwd=REPO).stdout.split("\n")
    files = [f for f in files if f and (REPO / f).is_file()]
    tar = subprocess.run(["tar", "-cf", "-", "-T", "-"], cwd=REPO, input="\n".join(files).encode(),
                         capture_output=True, check=True).stdout
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-xf", "-", "-C", str(dest)], input=tar, check=True)
    return [f for f in files if f.startswith("codeeval/")]


def build_wheel(src: Path, dist: Path) -> Path:
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", dist, src,
        cwd=dist.parent)
    return next(dist.glob("codeeval-*.whl"))


def clean_env(**extra: str) -> dict:
    """The environment of a shell that never saw the checkout: no PYTHONPATH, venv, codeeval or
    Prefect settings of the test session's."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith(("CODEEVAL_", "PREFECT_"))}
    return {**env, **extra}
