"""Per-repository Python environments, built offline and cached by a hash of the requirements.

A repository's requirements are read statically (never by running its setup.py): setup.py's
literal `install_requires`, setup.cfg's `install_requires` and pyproject.toml's `[project]
dependencies`, or, when it declares none, its `requirements.txt`; plus the pinned test runner
(TEST_REQUIREMENTS).
Their wheels are downloaded on the host for the execution image's interpreter (CPython 3.11,
manylinux x86_64: containers cannot reach a registry) and installed with `pip install --target`
(unpacking wheels: no package code runs) into `$CODEEVAL_CACHE/repo-envs/<hash>/lib/pythonX.Y/
site-packages`, which the test command gets as its user site (testrun.py): after the standard
library on sys.path. A requirement with no wheel is fetched as an sdist and built into a wheel
in the sandbox (sdists.py). Backports of modules the interpreter already has (decided from its
own `sys.stdlib_module_names`, interp.py) are never installed: a requirement named like a stdlib
module is dropped, and a top-level module of that name (enum34's `enum`, futures' `concurrent`)
is removed after the install. An environment that cannot be built raises `EnvError` naming the
package and why; its repository's samples are reported `env_error`, never as model failures.
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
from pathlib import Path
from typing import Optional

import tomllib

from codeeval.core.cache import cache_root
from codeeval.executors.repo import sdists
from codeeval.executors.repo.interp import InterpreterError, interpreter

# The test runner every environment gets (the references run pytest from the project's venv).
TEST_REQUIREMENTS = ("pytest==8.3.5",)
TARGET = ("--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11", "--abi", "cp311",
          "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
          "--platform", "manylinux2014_x86_64", "--platform", "manylinux1_x86_64", "--platform", "linux_x86_64",
          "--platform", "any")  # linux_x86_64: wheels built here from sdists (PyPI serves none)
RECIPE_VERSION = "2"
MAX_SDISTS = 20  # sdists one environment may need built (each found by a failed resolution)


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


def env_key(reqs: list[str], interp: Optional[dict] = None) -> str:
    return hashlib.sha256(json.dumps([RECIPE_VERSION, TARGET, TEST_REQUIREMENTS, reqs, interp]).encode()).hexdigest()[:16]


def site_packages(env: Path, interp: dict) -> Path:
    return env / "lib" / f"python{interp['version']}" / "site-packages"


def _name(requirement: str) -> Optional[str]:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(requirement).name
    except InvalidRequirement:
        return None


def stdlib_backports(reqs: list[str], stdlib: set[str]) -> list[str]:
    """The requirements named like a module of the interpreter's standard library (`typing`,
    `dataclasses`, `pathlib`...): installing them could only shadow the interpreter's own."""
    return [r for r in reqs if (n := _name(r)) and (n.lower() in stdlib or n.lower().replace("-", "_") in stdlib)]


def ensure_env(project_dir: Path, runner) -> Path:
    """The environment folder for this repository (built now if the cache lacks it), for the
    interpreter `runner` runs the tests with."""
    try:
        interp = interpreter(runner)
    except InterpreterError as exc:
        raise EnvError(f"environment of {project_dir.name}: {exc}") from exc
    reqs = requirements(project_dir)
    key = env_key(reqs, interp)
    envs = cache_root() / "repo-envs"
    env = envs / key
    if (env / ".complete").is_file():
        return env
    envs.mkdir(parents=True, exist_ok=True)
    fd = os.open(envs / ".build.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # one build at a time: builds share the wheel folders
        if (env / ".complete").is_file():
            return env
        return _build(project_dir, reqs, env, runner, interp)
    finally:
        os.close(fd)


QUIET = ("--quiet", "--disable-pip-version-check", "--no-input")
MISSING = re.compile(r"No matching distribution found for (\S+)")


def _pip(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=900)


def _why(done: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.startswith("ERROR")
             and "Ignored the following" not in ln] or done.stderr.strip().splitlines()[-1:]
    return lines[-1] if lines else f"pip exited {done.returncode}"


def _build(project_dir: Path, reqs: list[str], env: Path, runner, interp: dict) -> Path:
    key, envs = env.name, env.parent
    stdlib = set(interp["stdlib"])
    wheels, tools, built = cache_root() / "wheels", cache_root() / "repo-build-tools", sdists.built_dir()
    for d in (wheels, tools, built):
        d.mkdir(parents=True, exist_ok=True)
    work = envs / f".{key}.{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    dropped = stdlib_backports(reqs, stdlib)
    wanted = [r for r in reqs if r not in dropped]
    req_file = envs / f".{key}.{os.getpid()}.txt"
    req_file.write_text("\n".join([*wanted, *TEST_REQUIREMENTS]) + "\n")
    where = f"environment of {project_dir.name}"
    try:
        tried: set[str] = set()
        while True:
            done = _pip(["download", *QUIET, *TARGET, "--find-links", str(built), "-d", str(wheels),
                         "-r", str(req_file)])
            if done.returncode == 0:
                break
            missing = MISSING.search(done.stderr)
            if not missing or missing.group(1) in tried or len(tried) >= MAX_SDISTS:
                raise EnvError(f"{where}: {_why(done)}")
            tried.add(missing.group(1))
            backport = _sdist_wheel(missing.group(1), tools, runner, where, stdlib)
            if backport:  # a backport with no wheel for this Python (futures): a direct requirement is dropped
                direct = [r for r in wanted if _name(r) and _name(r).lower() == backport.lower()]
                if not direct:
                    raise EnvError(f"{where}: {missing.group(1)}: a backport of a stdlib module, required by "
                                   f"another requirement, with no wheel for this Python")
                dropped += direct
                wanted = [r for r in wanted if r not in direct]
                req_file.write_text("\n".join([*wanted, *TEST_REQUIREMENTS]) + "\n")
        site = site_packages(work, interp)
        done = _pip(["install", *QUIET, "--no-index", "--find-links", str(wheels), "--find-links", str(built),
                     *TARGET, "--no-compile", "--no-warn-conflicts", "--target", str(site), "-r", str(req_file)])
        if done.returncode != 0:
            raise EnvError(f"{where}: {_why(done)}")
        shutil.rmtree(site / "bin", ignore_errors=True)
        shadowing = _remove_stdlib_shadows(site, stdlib)
        (work / ".complete").write_text(json.dumps({"requirements": reqs, "not_installed_stdlib_backports": dropped,
                                                    "removed_stdlib_shadows": shadowing}) + "\n")
        try:
            work.rename(env)
        except OSError:  # another process built it first
            shutil.rmtree(work, ignore_errors=True)
        return env
    finally:
        req_file.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)


def _sdist_wheel(requirement: str, tools: Path, runner, where: str, stdlib: set[str]) -> Optional[str]:
    """A wheel for a requirement PyPI serves no wheel of: its sdist, built in the sandbox. Returns
    the requirement's name instead when the sdist only provides stdlib modules (a backport)."""
    try:
        found = sdists.find_sdist(requirement)
    except Exception as exc:  # pip's finder: a bad requirement string, the index unreachable
        raise EnvError(f"{where}: {requirement}: could not look it up on the index ({exc})") from exc
    if found is None:
        raise EnvError(f"{where}: {requirement}: no wheel or sdist on the index (No matching distribution found)")
    filename, url, sha = found
    try:
        sdist = sdists.fetch(url, sha, cache_root() / "sdists" / filename)
        provides = sdists.top_level(sdist)
        if provides and provides <= stdlib:
            return _name(requirement)
        done = _pip(["download", *QUIET, *TARGET, "-d", str(tools), "pip", *sdists.build_requires(sdist)])
        if done.returncode != 0:
            raise EnvError(f"{where}: {filename}: its build requirements: {_why(done)}")
        sdists.build_wheel(runner, sdist, tools)
        return None
    except sdists.SdistError as exc:
        raise EnvError(f"{where}: {exc}") from exc
    except OSError as exc:  # the download (pip's session raises requests' errors, OSErrors)
        raise EnvError(f"{where}: {filename}: could not fetch the sdist ({exc})") from exc


def _remove_stdlib_shadows(site: Path, stdlib: set[str]) -> list[str]:
    """Remove installed top-level modules named like the interpreter's stdlib ones (enum34's
    `enum`, futures' `concurrent`): they are backports, and the stdlib's must be imported."""
    removed = []
    for entry in sorted(site.iterdir()):
        if entry.name.endswith((".dist-info", ".data", ".pth")) or entry.name == "__pycache__":
            continue
        module = entry.name.split(".")[0]
        if module in stdlib:
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
            removed.append(entry.name)
    return removed
