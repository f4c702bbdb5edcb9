"""`codeeval demo-model`: built once (reduced budget here), cached, an ordinary HF model dir."""
from __future__ import annotations

import json
import time

from codeeval.generation import demo_model


def test_build_cache_and_reuse(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CODEEVAL_CACHE", str(tmp_path / "cache"))
    assert demo_model.default_dir() == tmp_path / "cache" / "demo-model"
    small = demo_model.replace(demo_model.TEST_RECIPE, steps=3, corpus_chars=100_000, vocab_size=512)
    logs = []
    path = demo_model.ensure_demo_model(recipe=small, log=logs.append)
    assert path == tmp_path / "cache" / "demo-model"
    assert any("saved to" in m for m in logs)
    stamp = json.loads((path / demo_model.STAMP).read_text())
    assert stamp["recipe"]["steps"] == 3 and stamp["parameters"] > 0

    # cached: the second call returns at once without training
    logs.clear()
    t0 = time.time()
    assert demo_model.ensure_demo_model(recipe=small, log=logs.append) == path
    assert time.time() - t0 < 1.0 and logs == []

    # an ordinary Hugging Face model directory, with eos, FIM tokens and a chat template
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert tok.eos_token == "<|endoftext|>" and "<fim_prefix>" in tok.get_vocab()
    assert tok.chat_template and model.config.vocab_size == len(tok)
    text = "def f(x):\n    return x  # ünïcode\n"
    assert tok.decode(tok(text)["input_ids"]) == text  # byte-level BPE round-trips



def test_cli_prints_the_path(tmp_path, capsys):
    target = tmp_path / "m"
    rc = demo_model.main(["--path", str(target), "--small", "--steps", "2", "--quiet"])
    assert rc == 0
    assert capsys.readouterr().out.strip() == str(target)
    assert (target / "config.json").is_file() and (target / demo_model.STAMP).is_file()


def test_corpus_is_the_standard_library():
    files = demo_model.corpus_files()
    assert files and all(f.suffix == ".py" for f in files) and files == sorted(files)
    assert sum(map(len, demo_model.load_corpus(50_000))) >= 50_000
