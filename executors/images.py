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

ROOT = Path(__file__).resolve().parents[1]  # the repository (editable install)

# Files whose bytes define each image (all of its build steps), relative to the repository root. Three layers, so
# that a change to the server rebuilds in seconds, not the packages (~1 min) or the base.
BASE_FILES = ("containers/base/rootfs.sh",)
PACKAGES_FILES = ("containers/python/requirements.txt", "containers/python/stage.sh")
PYTHON_FILES = ("containers/build.sh", "executors/runner.py", "executors/cputime.py", "executors/docker_server.py")
# The DS-1000 image: the base + the data-science stack (torch CPU) + the same server; built on demand only.
DS1000_FILES = ("containers/ds1000/requirements.txt", "containers/ds1000/build.sh", "executors/runner.py",
                "executors/cputime.py", "executors/docker_server.py")


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
    """DS-1000's sandbox image: numpy, scipy, pandas, scikit-learn, matplotlib and torch (CPU) at
    the releases closest to DS-1000's own for CPython 3.11, and the sandbox server. Not built by
    `make images` (about 1 GB): `make images-ds1000` (containers/ds1000/build.sh)."""
    return f"codeeval-ds1000:{_digest(DS1000_FILES, base_image())}"


# Execution.runtime -> (its image's name, what builds it)
RUNTIMES = {"python": (python_image, "make images"), "ds1000": (ds1000_image, "make images-ds1000")}


def runtime_image(runtime: str) -> str:
    return RUNTIMES[runtime][0]()


def main(argv: list[str]) -> int:
    images = {"base": base_image, "packages": packages_image, "python": python_image, "ds1000": ds1000_image}
    if len(argv) != 2 or argv[1] not in images:
        print(f"usage: {argv[0]} base|packages|python|ds1000", file=sys.stderr)
        return 2
    print(images[argv[1]]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
