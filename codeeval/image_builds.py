"""`codeeval images build`: the execution images, built from the recipes the package carries.

The recipes (codeeval/containers/) travel in the wheel beside the sandbox server they install,
so a host with only `pip install codeeval` builds the same images, under the same tags
(codeeval/executors/docker/images.py hashes the recipes' bytes), as a checkout's `make images`.
Each recipe is idempotent: a no-op when its tag exists.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from codeeval.core.cache import cache_root
from codeeval.core.errors import UsageError, unknown
from codeeval.executors.docker import images

CONTAINERS = Path(images.ROOT) / "containers"
# runtime -> its recipe, in the order `all` builds them (multiple and ds1000 build the python base first)
RECIPES = {"python": "build.sh", "multiple": "multiple/build.sh", "ds1000": "ds1000/build.sh"}
RUNTIMES = (*RECIPES, "all")


def build(runtime: str) -> int:
    """Run the recipes of `runtime` (python | multiple | ds1000 | all); their exit code."""
    if runtime not in RUNTIMES:
        raise UsageError(unknown("runtime", runtime, RUNTIMES))
    if shutil.which("bash") is None or shutil.which("docker") is None:
        raise UsageError("building images needs bash and the docker CLI (Debian's docker.io) on this host")
    env = {**os.environ, "PYTHON": sys.executable}  # tags computed by this interpreter's codeeval
    # scratch root file systems and wheels go to codeeval's cache, not beside the recipes (which a
    # wheel install keeps in site-packages)
    env.setdefault("CODEEVAL_BUILD_DIR", str(cache_root() / "image-builds"))
    env.setdefault("CODEEVAL_WHEELS", str(cache_root() / "wheels"))
    for name in (RECIPES if runtime == "all" else (runtime,)):
        done = subprocess.run(["bash", str(CONTAINERS / RECIPES[name])], env=env)
        if done.returncode:
            print(f"codeeval: error: the {name} image's recipe failed (exit {done.returncode}): "
                  f"{CONTAINERS / RECIPES[name]}", file=sys.stderr)
            return done.returncode
    return 0


def tags() -> dict[str, str]:
    """The tag each image would have, from the recipes installed here."""
    return {"python": images.python_image(), "ds1000": images.ds1000_image(),
            **{f"multiple-{s}": images.multiple_image(s) for s in images.MULTIPLE_TOOLCHAINS}}
