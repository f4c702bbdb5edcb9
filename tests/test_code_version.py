"""The code fingerprint that keys every cached shard (core/fingerprint.code_version) follows codeeval's
own sources and nothing else: an image build's staged root file system under codeeval/.cache (a
checkout's; CI saw a flow fail while another test's DS-1000 build removed its files) leaves it as it
was, and an edit to a module changes it."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import codeeval

PRINT = "from codeeval.core.fingerprint import code_version; print(code_version())"


def version_of(copy: Path) -> str:
    done = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(copy)!r}); {PRINT}"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_code_version_follows_the_sources_not_a_staged_build(tmp_path):
    package = tmp_path / "codeeval"
    shutil.copytree(Path(codeeval.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__", ".cache", "*.pyc"))
    before = version_of(tmp_path)
    staged = package / ".cache" / "images" / "ds1000" / "usr" / "lib" / "python3" / "dist-packages" / "x"
    staged.mkdir(parents=True)
    (staged / "__init__.py").write_text("VALUE = 1\n")
    assert version_of(tmp_path) == before
    with (package / "core" / "fingerprint.py").open("a") as fh:
        fh.write("\n# an edit\n")
    assert version_of(tmp_path) != before
