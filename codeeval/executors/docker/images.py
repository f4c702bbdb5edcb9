"""Names of the execution images: a tag is a hash of the recipe that builds the image.

Single source of truth for containers/build.sh (which runs this file as a script,
stdlib only) and for the Docker sandbox (which looks the image up by the same
name). A changed recipe, server or runner therefore changes the tag and rebuilds.

Every step that shapes the base and packages images lives in their recipe scripts
(containers/base/rootfs.sh, containers/python/stage.sh), not in containers/build.sh,
which only orders them; the python image's steps are in build.sh, which its tag hashes.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the codeeval package: recipes travel in it (wheel or checkout)

# Files whose bytes define each image (all of its build steps), relative to the package (codeeval/). Three layers, so
# that a change to the server rebuilds in seconds, not the packages (~1 min) or the base.
BASE_FILES = ("containers/base/rootfs.sh", "containers/lib.sh")
PACKAGES_FILES = ("containers/python/requirements.txt", "containers/python/stage.sh")
# The server layer's files: what containers/server_layer.sh copies into /opt/codeeval, by the same globs.
_INSIDE = ROOT / "executors" / "docker" / "inside"  # the server, copied flat into /opt/codeeval
SERVER_FILES = ("containers/server_layer.sh", "executors/runner.py",
                *(p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "executors" / "cputime").glob("*.py"))),
                "executors/docker/inside/server.py",
                *(p.relative_to(ROOT).as_posix() for p in sorted(_INSIDE.glob("server_*.py"))))
PYTHON_FILES = ("containers/build.sh", *SERVER_FILES)
# The DS-1000 image: the base + the data-science stack (torch and tensorflow CPU) + the same server; on demand only.
DS1000_FILES = ("containers/ds1000/requirements.txt", "containers/ds1000/build.sh", *SERVER_FILES)
# MultiPL-E: Debian toolchains (bookworm for 20 languages, trixie for Swift), then the same sandbox server.
MULTIPLE_TOOLCHAINS = {suite: ("containers/multiple/rootfs.sh", "containers/lib.sh", f"containers/multiple/{suite}.txt")
                       for suite in ("bookworm", "trixie")}
MULTIPLE_SERVER_FILES = ("containers/multiple/build.sh", *SERVER_FILES)


# Runtimes whose jobs run in the python image (repo: a repository's tests, the repository mounted).
PYTHON_RUNTIMES = frozenset({"python", "repo"})


class RuntimeUnavailable(LookupError):
    """A runtime no image provides (Julia: no Debian package, no offline installer)."""


def _digest(files: tuple[str, ...], parent: str = "") -> str:
    h = hashlib.sha256(parent.encode() + b"\0")
    for rel in files:
        h.update(rel.encode() + b"\0")
        h.update((ROOT / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:12]


def base_image() -> str:
    """Debian bookworm minbase + python3 (debootstrap, docker import)."""
    return f"codeeval-base:{_digest(BASE_FILES)}"


def packages_image() -> str:
    """The base + the Python packages benchmarks need (wheels downloaded on the host)."""
    return f"codeeval-packages:{_digest(PACKAGES_FILES, base_image())}"


def python_image() -> str:
    """The image the Docker sandbox runs programs in: the packages + the sandbox server."""
    return f"codeeval-python:{_digest(PYTHON_FILES, packages_image())}"


def ds1000_image() -> str:
    """DS-1000's sandbox image: numpy, scipy, pandas, scikit-learn, matplotlib, torch and
    tensorflow (CPU) at the releases closest to DS-1000's own for CPython 3.11, and the sandbox
    server. Not built by `make images` (about 2.5 GB): `make images-ds1000` (containers/ds1000/build.sh)."""
    return f"codeeval-ds1000:{_digest(DS1000_FILES, base_image())}"


def multiple_toolchains(suite: str) -> str:
    """Debian `suite` minbase + python3 + the MultiPL-E toolchains of containers/multiple/<suite>.txt."""
    return f"codeeval-multiple-{suite}-toolchains:{_digest(MULTIPLE_TOOLCHAINS[suite])}"


def multiple_image(suite: str) -> str:
    """A MultiPL-E toolchain image + the sandbox server (the image a `multiple-<lang>` job runs in)."""
    return f"codeeval-multiple-{suite}:{_digest(MULTIPLE_SERVER_FILES, multiple_toolchains(suite))}"


def runtime_image(runtime: str) -> str:
    """The image of an Execution.runtime: `python`, `ds1000`, or `multiple-<lang>` (Swift: trixie;
    the rest: bookworm)."""
    if runtime in PYTHON_RUNTIMES:
        return python_image()
    if runtime == "ds1000":
        return ds1000_image()
    if runtime == "multiple-jl":
        raise RuntimeUnavailable(
            "multiple-jl cannot be executed: Julia has no Debian package (bookworm or trixie) and its PyPI/npm "
            "installers download binaries at run time, which an offline machine cannot do (docs/multiple.md)")
    if runtime == "multiple-swift":
        return multiple_image("trixie")
    if runtime.startswith("multiple-"):
        return multiple_image("bookworm")
    raise RuntimeUnavailable(f"unknown execution runtime {runtime!r}")


def build_command(runtime: str) -> str:
    """What builds a runtime's image (the installed package carries the recipes)."""
    kind = "ds1000" if runtime == "ds1000" else "multiple" if runtime.startswith("multiple-") else "python"
    return f"codeeval images build --runtime {kind}"


def main(argv: list[str]) -> int:
    images = {"base": base_image, "packages": packages_image, "python": python_image, "ds1000": ds1000_image,
              **{f"multiple-{suite}-toolchains": (lambda s=suite: multiple_toolchains(s)) for suite in MULTIPLE_TOOLCHAINS},
              **{f"multiple-{suite}": (lambda s=suite: multiple_image(s)) for suite in MULTIPLE_TOOLCHAINS}}
    if len(argv) != 2 or argv[1] not in images:
        print(f"usage: {argv[0]} {'|'.join(images)}", file=sys.stderr)
        return 2
    print(images[argv[1]]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
