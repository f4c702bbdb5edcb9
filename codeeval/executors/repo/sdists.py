"""Requirements published only as source distributions: fetched on the host, built in the sandbox.

The host never runs an sdist's code (`pip download` of an sdist would run its setup.py to read
its metadata): pip's own package finder (so pip's index, certificate and proxy settings apply)
picks the sdist and its bytes are fetched and hash-checked; the build requirements are read from
the archive's pyproject.toml (setuptools + wheel when it has none) and downloaded as wheels with
pip itself. The wheel is then built offline where the tests run (the execution image, network
none; `pip wheel --no-deps` from pip's own wheel, which runs from the zip) and cached by the
sdist's sha256, so a later environment that needs the same sdist reuses the wheel.
"""
from __future__ import annotations

import hashlib
import logging
import re
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Optional

import tomllib

from codeeval.core.cache import cache_root

DEFAULT_BUILD_REQUIRES = ["setuptools>=40.8.0", "wheel"]
BUILD_TIMEOUT_S = 600.0


class SdistError(RuntimeError):
    """The sdist could not be fetched or built (the message says which and why)."""


def _pip(command: str):
    """pip's `command`, run in this process. setuptools is imported first: pip loads distutils, and
    once the standard library's copy is loaded, every later `import setuptools` in the process fails
    (setuptools' _distutils_hack asserts), torch.compile's C++ build among them: a worker that ran
    a repo-level shard would then decode without its compiled step."""
    try:
        import setuptools  # noqa: F401
    except ImportError:  # no setuptools: nothing can fail that way
        pass
    from pip._internal.commands import create_command

    return create_command(command)


def find_sdist(requirement: str) -> Optional[tuple[str, str, str]]:
    """(file name, url, sha256 or "") of the best sdist for `requirement` on pip's configured
    index; None when there is none. pip's internals: the one client that knows the index."""
    from packaging.requirements import Requirement

    req = Requirement(requirement)
    logging.getLogger("pip").setLevel(logging.ERROR)  # its "Location ... is ignored" chatter
    cmd = _pip("download")
    options, _ = cmd.parse_args(["--no-binary", ":all:", "--quiet"])
    with cmd.main_context():
        session = cmd.get_default_session(options)
        finder = cmd._build_package_finder(options=options, session=session, ignore_requires_python=True)
        best = finder.find_best_candidate(req.name, req.specifier).best_candidate
        if best is None:
            return None
        link = best.link
        return link.filename, link.url.split("#")[0], (link.hash if link.hash_name == "sha256" else "") or ""


def fetch(url: str, sha256: str, dest: Path) -> Path:
    """The sdist's bytes, through pip's session (pip's certificate and proxy), hash-checked."""
    if dest.is_file() and (not sha256 or hashlib.sha256(dest.read_bytes()).hexdigest() == sha256):
        return dest
    cmd = _pip("download")
    options, _ = cmd.parse_args(["--quiet"])
    with cmd.main_context():
        response = cmd.get_default_session(options).get(url, timeout=180)
        response.raise_for_status()
        data = response.content
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise SdistError(f"{dest.name}: downloaded bytes do not match the index's sha256")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(dest)
    return dest


def build_requires(sdist: Path) -> list[str]:
    """[build-system] requires of the archive's top-level pyproject.toml, read without running it."""
    text = None
    try:
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as z:
                names = [n for n in z.namelist() if re.fullmatch(r"[^/]+/pyproject\.toml", n)]
                text = z.read(names[0]).decode() if names else None
        else:
            with tarfile.open(sdist) as t:
                member = next((m for m in t.getmembers() if re.fullmatch(r"[^/]+/pyproject\.toml", m.name)), None)
                text = t.extractfile(member).read().decode() if member else None
    except (OSError, tarfile.TarError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise SdistError(f"{sdist.name}: unreadable archive ({exc})") from exc
    if text is None:
        return list(DEFAULT_BUILD_REQUIRES)
    try:
        requires = tomllib.loads(text).get("build-system", {}).get("requires")
    except tomllib.TOMLDecodeError:
        requires = None
    return list(requires) if requires is not None else list(DEFAULT_BUILD_REQUIRES)


def _names(sdist: Path) -> list[str]:
    if sdist.name.endswith(".zip"):
        with zipfile.ZipFile(sdist) as z:
            return z.namelist()
    with tarfile.open(sdist) as t:
        return t.getnames()


def top_level(sdist: Path) -> set[str]:
    """The packages an sdist provides, read from the archive (no code run): its egg-info's
    top_level.txt, else the top-level (or src/) folders holding an __init__.py."""
    try:
        names = _names(sdist)
        top = [n for n in names if re.fullmatch(r"[^/]+/[^/]+\.egg-info/top_level\.txt", n)]
        if top:
            if sdist.name.endswith(".zip"):
                with zipfile.ZipFile(sdist) as z:
                    text = z.read(top[0]).decode()
            else:
                with tarfile.open(sdist) as t:
                    text = t.extractfile(top[0]).read().decode()
            return {ln.strip() for ln in text.splitlines() if ln.strip()}
    except (OSError, tarfile.TarError, zipfile.BadZipFile, UnicodeDecodeError, KeyError):
        return set()
    return {m.group(1) for n in names if (m := re.fullmatch(r"[^/]+/(?:src/)?([^/]+)/__init__\.py", n))}


def built_dir() -> Path:
    """Wheels built from sdists, one flat folder (pip reads it with --find-links)."""
    return cache_root() / "repo-built-wheels"


def build_wheel(runner, sdist: Path, tools: Path) -> Path:
    """The wheel of `sdist`, built by `runner` where the tests run (offline) with the wheels in
    `tools` (pip, the build requirements); cached by the sdist's sha256."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    out_dir = built_dir()
    marker = out_dir / f".{digest}"
    if marker.is_file() and (out_dir / marker.read_text().strip()).is_file():
        return out_dir / marker.read_text().strip()
    pip_wheel = sorted(tools.glob("pip-*.whl"))
    if not pip_wheel:
        raise SdistError("no pip wheel to build with")
    work = cache_root() / "tmp" / f"build-{digest[:16]}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    work.chmod(0o777)  # the sandbox runs as the caller's uid, but be safe with a root-owned cache
    try:
        run = runner.tool(["python3", f"/tools/{pip_wheel[-1].name}/pip", "wheel", "--no-deps", "--no-index",
                           "--disable-pip-version-check", "--find-links", "/tools", "-w", "/out",
                           f"/sdist/{sdist.name}"],
                          {"/tools": (tools, False), "/sdist": (sdist.parent, False), "/out": (work, True)},
                          BUILD_TIMEOUT_S)
        wheels = sorted(work.glob("*.whl"))
        if run.exit_code != 0 or not wheels:
            lines = [ln for ln in run.output.splitlines() if ln.strip() and "notice" not in ln.lower()]
            why = next((ln.strip() for ln in reversed(lines) if "error" in ln.lower()), lines[-1].strip() if lines
                       else f"exit {run.exit_code}")
            raise SdistError(f"{sdist.name} (published only as an sdist) did not build in the sandbox: {why}")
        out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheels[0], out_dir / (wheels[0].name + ".part"))
        (out_dir / (wheels[0].name + ".part")).replace(out_dir / wheels[0].name)
        marker.write_text(wheels[0].name + "\n")
        return out_dir / wheels[0].name
    finally:
        shutil.rmtree(work, ignore_errors=True)
