"""--model as a GGUF file or a directory holding one, and the cache key of such a model."""
from __future__ import annotations

import os

import pytest

from codeeval.cli import main
from codeeval.core.errors import UsageError
from codeeval.core.fingerprint import model_fingerprint
from codeeval.generation.models.model_source import ModelSource, resolve


def test_a_gguf_file_or_a_directory_with_one_loads_with_gguf_file(tmp_path):
    weights = tmp_path / "m" / "Tiny.Q4_1.gguf"
    weights.parent.mkdir()
    weights.write_bytes(b"GGUF")
    assert resolve(str(weights)) == ModelSource(str(weights.parent), "Tiny.Q4_1.gguf")
    assert resolve(str(weights.parent)) == ModelSource(str(weights.parent), "Tiny.Q4_1.gguf")
    assert resolve(str(weights.parent)).load_kwargs() == {"gguf_file": "Tiny.Q4_1.gguf"}
    assert resolve(str(weights.parent)).single_file() == str(weights)
    # a directory with config.json is an ordinary model directory, whatever else it holds
    (weights.parent / "config.json").write_text("{}")
    assert resolve(str(weights.parent)) == ModelSource(str(weights.parent))
    # hub ids pass through
    assert resolve("bigcode/santacoder") == ModelSource("bigcode/santacoder")
    assert resolve("bigcode/santacoder").load_kwargs() == {}


def test_missing_or_ambiguous_gguf_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="model file not found"):
        resolve(str(tmp_path / "absent.gguf"))
    for name in ("a.Q4_0.gguf", "a.Q8_0.gguf"):
        (tmp_path / name).write_bytes(b"GGUF")
    with pytest.raises(UsageError, match=r"several GGUF files \(a.Q4_0.gguf, a.Q8_0.gguf\)"):
        resolve(str(tmp_path))


def test_the_cli_reports_an_ambiguous_gguf_directory_before_anything_runs(tmp_path, data_dir, capsys):
    for name in ("a.Q4_0.gguf", "a.Q8_0.gguf"):
        (tmp_path / name).write_bytes(b"GGUF")
    code = main(["run", "--model", str(tmp_path), "--tasks", "humaneval", "--allow_code_execution",
                 "--data-dir", str(data_dir), "--output-dir", str(tmp_path / "run")])
    assert code == 2 and "several GGUF files" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_fingerprint_covers_a_gguf_file_and_the_small_files_beside_it(tmp_path):
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF" + b"\0" * 64)
    (tmp_path / "unrelated.bin").write_bytes(b"x")
    first = model_fingerprint(str(weights))
    assert first.startswith("file:") and first == model_fingerprint(str(weights))
    (tmp_path / "unrelated.bin").write_bytes(b"xy")  # a large file beside it is not the model
    assert model_fingerprint(str(weights)) == first
    os.utime(weights, ns=(1, 1))  # rewritten weights: a new mtime
    touched = model_fingerprint(str(weights))
    assert touched != first
    weights.write_bytes(b"GGUF" + b"\0" * 65)  # a new size
    os.utime(weights, ns=(1, 1))
    assert model_fingerprint(str(weights)) not in (first, touched)
    resized = model_fingerprint(str(weights))
    (tmp_path / "tokenizer_config.json").write_text('{"chat_template": "x"}')  # transformers reads it
    assert model_fingerprint(str(weights)) != resized
    # a directory holding the GGUF file: its name, size and mtime count as for other weights
    as_dir = model_fingerprint(str(tmp_path))
    weights.rename(tmp_path / "renamed.gguf")
    assert model_fingerprint(str(tmp_path)) != as_dir
