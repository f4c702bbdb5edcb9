"""Per-repository Python environments, built offline and cached by a hash of the requirements.

A repository's requirements are read statically (never by running its setup.py): setup.py's
literal `install_requires`, setup.cfg's `install_requires` and pyproject.toml's `[project]
dependencies`, or, when it declares none, its `requirements.txt`; plus the pinned test runner
(TEST_REQUIREMENTS).
Their wheels are downloaded on the host for the execution image's interpreter (CPython 3.11,
manylinux x86_64: containers cannot reach a registry) and installed with `pip install --target`
into `$CODEEVAL_CACHE/repo-envs/<hash>`, which the test command gets on PYTHONPATH (ahead of
the image's own packages). An environment that cannot be built raises `EnvError`; its
repository's samples are reported `env_error`, never as model failures.
"""
from __future__ import annotations

import ast
import configparser
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from codeeval.cache import cache_root

# The test runner every environment gets (the references run pytest from the project's venv).
TEST_REQUIREMENTS = ("pytest==8.3.5",)
TARGET = ("--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11", "--abi", "cp311",
          "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
          "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64", "--platform", "any")
RECIPE_VERSION = "1"


class EnvError(RuntimeError):
    """The repository's environment cannot be built (a requirement has no installable wheel...)."""


def _requirement_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.split(" #")[0].strip()
        if line and not line.startswith(("#", "-")):
            out.append(line)
    return out


def _setup_py(path: Path):
    """setup.py's literal install_requires; None when it has none (or not a literal)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return [str(v) for v in value] if isinstance(value, (list, tuple)) else None
    return None


def _declared(project_dir: Path):
    """The package's declared runtime dependencies (setup.py, setup.cfg, pyproject.toml); None
    when it declares none."""
    found = None
    if (project_dir / "setup.py").is_file():
        found = _setup_py(project_dir / "setup.py")
    if (project_dir / "setup.cfg").is_file():
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read(project_dir / "setup.cfg")
            if cfg.has_option("options", "install_requires"):
                found = (found or []) + _requirement_lines(cfg.get("options", "install_requires"))
        except configparser.Error:
            pass
    if (project_dir / "pyproject.toml").is_file():
        try:
            deps = tomllib.loads((project_dir / "pyproject.toml").read_text()).get("project", {}).get("dependencies")
        except tomllib.TOMLDecodeError:
            deps = None
        if deps is not None:
            found = (found or []) + list(deps)
    return found


def requirements(project_dir: Path) -> list[str]:
    """The repository's runtime requirements, sorted and de-duplicated: what its packaging
    metadata declares (even an empty list), else its requirements.txt. A requirements.txt beside
    declared dependencies usually lists development tools (python-hl7's: Sphinx, tox, black)."""
    reqs = _declared(project_dir)
    if reqs is None and (project_dir / "requirements.txt").is_file():
        reqs = _requirement_lines((project_dir / "requirements.txt").read_text(errors="replace"))
    return sorted(set(re.sub(r"\s+", "", r) for r in reqs or []))


def env_key(reqs: list[str]) -> str:
    return hashlib.sha256(json.dumps([RECIPE_VERSION, TARGET, TEST_REQUIREMENTS, reqs]).encode()).hexdigest()[:16]


def ensure_env(project_dir: Path, pip: tuple[str, ...] = (sys.executable, "-m", "pip")) -> Path:
    """The environment folder for this repository (built now if the cache lacks it)."""
    reqs = requirements(project_dir)
    key = env_key(reqs)
    envs = cache_root() / "repo-envs"
    env = envs / key
    if (env / ".complete").is_file():
        return env
    envs.mkdir(parents=True, exist_ok=True)
    fd = os.open(envs / ".build.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # one build at a time: builds share the wheel folder
        if (env / ".complete").is_file():
            return env
        return _build(project_dir, reqs, env, pip)
    finally:
        os.close(fd)


def _build(project_dir: Path, reqs: list[str], env: Path, pip: tuple[str, ...]) -> Path:
    key, envs = env.name, env.parent
    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    work = envs / f".{key}.{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    req_file = envs / f".{key}.{os.getpid()}.txt"
    req_file.write_text("\n".join([*reqs, *TEST_REQUIREMENTS]) + "\n")
    quiet = ("--quiet", "--disable-pip-version-check", "--no-input")
    try:
        for cmd in ([*pip, "download", *quiet, *TARGET, "-d", str(wheels), "-r", str(req_file)],
                    [*pip, "install", *quiet, "--no-index", "--find-links", str(wheels), *TARGET, "--no-compile",
                     "--no-warn-conflicts", "--target", str(work), "-r", str(req_file)]):
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                lines = [ln for ln in done.stderr.strip().splitlines() if ln.startswith("ERROR")
                         and "Ignored the following" not in ln] or done.stderr.strip().splitlines()[-1:]
                why = f"environment of {project_dir.name} ({', '.join(reqs) or 'no requirements'}): " + \
                    (lines[-1] if lines else f"pip exited {done.returncode}")
                raise EnvError(why)
        shutil.rmtree(work / "bin", ignore_errors=True)
        (work / ".complete").write_text("\n".join(reqs) + "\n")
        try:
            work.rename(env)
        except OSError:  # another process built it first
            shutil.rmtree(work, ignore_errors=True)
        return env
    finally:
        req_file.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
