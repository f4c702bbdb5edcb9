"""Compiled decode steps from the team's storage (codeeval/generation/hf/compile_store.py): a fresh
process on another host, with an empty Inductor cache and a codeeval cache of its own, finds the
step that the first host compiled and decodes the same tokens; an entry that cannot be used is
skipped with one line and never fails a run. How much sooner the second host decodes is
bench/gpu.py's figure (`--smoke --parts coldstart` on the CPU), not a test's."""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_static_decoder import llama_dir, tokenizer  # noqa: E402,F401,F811 (fixtures)

from codeeval.generation.hf import compile_store  # noqa: E402
from codeeval.generation.hf.compile_store import MAGIC, CompileStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

HOST = """
import json, sys
from codeeval.generation import BackendSpec, GenerationArgs
from codeeval.generation.hf.transformers_backend import TransformersBackend
from codeeval.generation.prompts.requests import Job

spec = BackendSpec("transformers", sys.argv[1], GenerationArgs(do_sample=True, temperature=0.8, seed=3),
                   device="cpu", options=(("decoder", "static"), ("compile", "yes")))
backend = TransformersBackend(spec)
rows = [Job(ids=backend.tokenizer(p)["input_ids"], budget=7, stops=(), seed_key=(f"T/{i}", s))
        for i, p in enumerate(["def add(a, b):", "import os\\n"]) for s in range(2)]
out = backend.decode_rows(rows)
print(json.dumps({"out": out, "mode": backend._static.mode, "stats": backend.stats}))
"""


def run_host(tmp: Path, name: str, model: str, store: Path) -> dict:
    """A process as a fresh host runs it: its own codeeval cache and an empty Inductor cache; the
    storage root shared."""
    env = {**os.environ, "CODEEVAL_STORAGE": str(store), "CODEEVAL_CACHE": str(tmp / name / "cache"),
           "TORCHINDUCTOR_CACHE_DIR": str(tmp / name / "inductor"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", HOST, model], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]) | {"stderr": done.stderr}


def test_a_second_host_decodes_the_first_hosts_compiled_step(llama_dir, tmp_path):
    store = tmp_path / "storage"
    first = run_host(tmp_path, "host-a", llama_dir, store)
    entries = sorted((store / compile_store.FOLDER).glob("*.bin"))
    assert (first["mode"], first["stats"]["store_misses"], first["stats"]["store_hits"]) == ("compiled", 1, 0)
    assert len(entries) == 1 and entries[0].read_bytes().startswith(MAGIC)
    second = run_host(tmp_path, "host-b", llama_dir, store)
    assert (second["mode"], second["stats"]["store_misses"], second["stats"]["store_hits"]) == ("compiled", 0, 1)
    assert second["out"] == first["out"]
    # the C++ kernels came with the entry: host b's Inductor cache holds them without having built them
    kernels, built = ({p.relative_to(tmp_path / host / "inductor") for p in (tmp_path / host / "inductor").rglob("*.so")}
                      for host in ("host-b", "host-a"))
    assert kernels and built <= kernels
    assert "compile store" not in second["stderr"]


def entry(key: str, meta_key: str, artifacts: bytes = b"", kernels: bytes = b"", torch_version=None) -> bytes:
    import torch

    meta = json.dumps({"key": meta_key, "torch": torch_version or torch.__version__}).encode()
    return MAGIC + len(meta).to_bytes(4, "big") + meta + len(artifacts).to_bytes(8, "big") + artifacts + kernels


def tar_of(name: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:xz") as tar:
        info = tarfile.TarInfo(name)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    return out.getvalue()


@pytest.mark.parametrize("what, blob, said", [
    ("garbage", lambda k: b"\x00\x01 not an entry", "not a compiled-step entry"),
    ("another key's", lambda k: entry(k, "0" * 32), "written for 0000"),
    ("another torch's", lambda k: entry(k, k, torch_version="1.0"), "by torch 1.0"),
    ("torn", lambda k: entry(k, k, artifacts=b"x" * 100)[:-40], "truncated"),
    ("a path out of the cache", lambda k: entry(k, k, kernels=tar_of("../../escaped.so")), "a path outside"),
])
def test_an_entry_that_cannot_be_used_is_skipped_with_one_line(tmp_path, monkeypatch, caplog, what, blob, said):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    store = CompileStore(tmp_path / "compiled")
    key = "k" * 32
    store.path(key).parent.mkdir(parents=True)
    store.path(key).write_bytes(blob(key))
    with caplog.at_level(logging.WARNING, logger="codeeval.generation.hf.compile_store"):
        assert store.load(key) is False
        assert store.load(key) is False  # looked up once a process
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "compile store:" in lines[0] and said in lines[0], lines
    assert not (tmp_path / "escaped.so").exists() and not list((tmp_path / "inductor").rglob("*.so"))


def test_nothing_is_saved_for_a_key_that_was_found_or_never_looked_up(tmp_path):
    store = CompileStore(tmp_path / "compiled")
    assert store.save("never-looked-up") is None
    assert not (tmp_path / "compiled").exists()
