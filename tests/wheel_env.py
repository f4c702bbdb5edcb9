"""The package as a team gets it, shared by tests/test_wheel.py and tests/test_team_package.py: a
clean clone of this commit (git's tracked and unignored files, nothing built), the wheel built
from it, and that wheel installed once per session (tests/conftest.py `installed_wheel`) into a
fresh venv outside the checkout by docs/deployment.md's own "every host" block, with nothing of
the checkout's environment leaking into what runs the wheel."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from docker_env import REPO

HOSTS = ("every host", "the server host", "once, from any host", "each GPU host", "each CPU host",
         "anywhere with the package")
DOCS_VENV = "/opt/codeeval"  # the docs' venv, replaced by the session's

# What a test could change in the venv it shares: the installed distributions, and codeeval's
# files against the hashes its wheel recorded (pip's RECORD). Prefect's server writes its UI
# bundle into the venv (prefect/server/ui_build): a cache of the installed prefect, not counted.
FINGERPRINT = """
import base64, hashlib, importlib.metadata as md, json
dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in md.distributions())
changed = []
for f in md.distribution("codeeval").files:
    if f.hash is None:
        continue
    digest = base64.urlsafe_b64encode(hashlib.new(f.hash.mode, f.locate().read_bytes()).digest()).rstrip(b"=")
    if digest.decode() != f.hash.value:
        changed.append(str(f))
print(json.dumps({"dists": dists, "changed": changed}))
"""


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


def team_blocks() -> dict[str, str]:
    """The `bash` blocks of docs/deployment.md's sections 1 to 5, by the host their first line names."""
    text = (REPO / "docs" / "deployment.md").read_text()
    team = text.split("## 1. Every host", 1)[1].split("## 6. When a shard fails", 1)[0]
    blocks = {}
    for block in re.findall(r"```bash\n(.*?)```", team, re.S):
        (host,) = [h for h in HOSTS if block.startswith(f"# {h}")]
        blocks[host] = block
    assert list(blocks) == list(HOSTS), list(blocks)
    return blocks


def substitute(block: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        block = block.replace(old, new)
    return "set -euo pipefail\n" + block


@dataclass(frozen=True)
class Wheel:
    """The wheel built from the session's clean clone."""
    package_files: list[str]  # the clone's codeeval/ files: what the wheel must carry
    path: Path


@dataclass(frozen=True)
class Package:
    """The session's wheel installed in a venv outside the checkout."""
    venv: Path
    install_s: float  # the docs' install block, run once for the session

    def fingerprint(self) -> dict:
        return json.loads(run(self.venv / "bin" / "python", "-c", FINGERPRINT, cwd=self.venv, env=clean_env()).stdout)

    def changes_since(self, installed: dict) -> dict:
        """What differs from the fingerprint taken at install: distributions added or removed,
        codeeval's files no longer as the wheel wrote them. Empty when nothing did."""
        now = self.fingerprint()
        diff = {"added": sorted(set(now["dists"]) - set(installed["dists"])),
                "removed": sorted(set(installed["dists"]) - set(now["dists"])), "changed": now["changed"]}
        return {k: v for k, v in diff.items() if v}

    def imported_from(self, cwd: Path) -> str:
        """Where the venv's python, started in cwd with a clean environment, imports codeeval from."""
        return run(self.venv / "bin" / "python", "-c", "import codeeval; print(codeeval.__file__)", cwd=cwd,
                   env=clean_env()).stdout.strip()


def build(root: Path) -> Wheel:
    """A clean clone in root/clone and its wheel in root/dist."""
    package_files = clone(root / "clone")
    dist = root / "dist"
    dist.mkdir()
    return Wheel(package_files, build_wheel(root / "clone", dist))


def install(wheel: Wheel, root: Path) -> tuple[Package, dict]:
    """The docs' "every host" block, run in the wheel's directory with /opt/codeeval replaced by
    root/opt-codeeval; returns the package and its venv's fingerprint."""
    venv = root / "opt-codeeval"
    script = root / "install.sh"
    script.write_text(substitute(team_blocks()["every host"], {DOCS_VENV: str(venv)}))
    started = time.monotonic()
    done = subprocess.run(["bash", str(script)], cwd=wheel.path.parent,
                          env=clean_env(HOME=os.environ.get("HOME", str(root))), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"every host: exit {done.returncode}\n{(done.stdout + done.stderr)[-4000:]}"
    package = Package(venv, time.monotonic() - started)
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    assert package.imported_from(elsewhere).startswith(str(venv) + "/")  # not the checkout
    fingerprint = package.fingerprint()
    assert not fingerprint["changed"], fingerprint["changed"]  # installed as the wheel recorded
    return package, fingerprint
