"""The locally trained test model: built once (reduced budget here), cached, an ordinary HF model dir."""
from __future__ import annotations

import json
from dataclasses import replace

import demo_model


def test_build_cache_and_reuse(tmp_path, monkeypatch):
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    assert demo_model.default_dir() == tmp_path / "cache" / "demo-model"
    small = replace(demo_model.TEST_RECIPE, steps=3, corpus_chars=100_000, vocab_size=512)
    # log=None is silent (a fresh machine once crashed here: the cache was missing)
    path = demo_model.ensure_demo_model(recipe=small, log=None)
    assert path == tmp_path / "cache" / "demo-model"
    stamp_file = path / demo_model.STAMP
    stamp = json.loads(stamp_file.read_text())
    assert stamp["recipe"]["steps"] == 3 and stamp["parameters"] > 0

    # cached: the second call returns the same directory without training or rewriting it
    logs = []
    written = stamp_file.stat().st_mtime_ns
    assert demo_model.ensure_demo_model(recipe=small, log=logs.append) == path
    assert logs == [] and stamp_file.stat().st_mtime_ns == written

    # an ordinary Hugging Face model directory, with eos, FIM tokens and a chat template
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert tok.eos_token == "<|endoftext|>" and "<fim_prefix>" in tok.get_vocab()
    assert tok.chat_template and model.config.vocab_size == len(tok)
    text = "def f(x):\n    return x  # ünïcode\n"
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level BPE round-trips


def test_corpus_is_the_standard_library():
    files = demo_model.corpus_files()
    assert files and all(f.suffix == ".py" for f in files) and files == sorted(files)
    assert sum(map(len, demo_model.load_corpus(50_000))) >= 50_000
