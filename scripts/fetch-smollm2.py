#!/usr/bin/env python3
"""Fetch SmolLM2-135M-Instruct (Apache-2.0) as one GGUF file into the checkout's .cache/: the
checkout's default for `codeeval models fetch smollm2` (codeeval/generation/models/smollm2.py does it).

    .venv/bin/python scripts/fetch-smollm2.py     # prints the .gguf path (make smollm2)
    .venv/bin/python scripts/fetch-smollm2.py --hf [DIR]   # prints the HF directory's path
"""
from __future__ import annotations

import sys
from pathlib import Path

from codeeval.cli import main  # run with the venv's python (make smollm2)

DEFAULT_DIR = Path(__file__).resolve().parents[1] / ".cache" / "models" / "SmolLM2-135M-Instruct"

if __name__ == "__main__":
    args = sys.argv[1:]
    raise SystemExit(main(["models", "fetch", "smollm2", *([] if "--dir" in args else ["--dir", str(DEFAULT_DIR)]),
                           *args]))
