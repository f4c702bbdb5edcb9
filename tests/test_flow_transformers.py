"""A tiny transformers model, built from a config in the test, through the whole flow."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from codeeval.cli import main


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, data_dir):
    """A 2-layer GPT-2 with random weights and a byte-level BPE trained here on HumanEval prompts."""
    import gzip

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    texts = [json.loads(line)["prompt"] for line in gzip.open(data_dir / "humaneval" / "HumanEval.jsonl.gz", "rt")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=tokenizer.vocab_size, n_positions=1024, n_embd=32, n_layer=2, n_head=2,
                        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id)
    path = tmp_path_factory.mktemp("tiny-model")
    GPT2LMHeadModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_tiny_model_generates_real_text_through_generation_execution_and_metrics(
        prefect_api, data_dir, tiny_model, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--model", str(tiny_model), "--tasks", "humaneval", "--limit", "3", "--n_samples", "2",
                 "--do_sample", "false", "--max_new_tokens", "24", "--batch_size", "4", "--allow_code_execution",
                 "--executor", "local", "--data-dir", str(data_dir), "--output-dir", str(out), "--k", "1,2"])
    text = capsys.readouterr().out
    assert code == 0
    gens = pq.read_table(out / "humaneval" / "generations" / "shard-00000.parquet").to_pylist()
    problems = pq.read_table(out / "humaneval" / "problems.parquet").to_pylist()
    assert len(gens) == 6
    prompts = {p["task_id"]: p["prompt"] for p in problems}
    for row in gens:
        assert row["raw"] and 0 < row["n_tokens"] <= 24
        assert row["finish_reason"] in {"stop", "eos", "length"}
        assert row["completion"].startswith(prompts[row["task_id"]])  # stops never cut into the prompt
    # greedy: both samples of a problem are the same text
    by_task = {}
    for row in gens:
        by_task.setdefault(row["task_id"], set()).add(row["raw"])
    assert all(len(raws) == 1 for raws in by_task.values())
    execs = pq.read_table(out / "humaneval" / "executions" / "shard-00000.parquet").to_pylist()
    assert len(execs) == 6 and all(r["status"] in {"passed", "failed", "timeout"} for r in execs)
    results = json.loads((out / "results.json").read_text())
    passed = sum(r["passed"] for r in execs)
    assert results["codeeval"]["tasks"]["humaneval"]["passed"] == passed
    assert set(results["humaneval"]) == {"pass@1", "pass@2"}
    assert results["humaneval"]["pass@1"] == pytest.approx(passed / 6)
    run = json.loads((out / "run.json").read_text())
    assert run["backend"] == "transformers" and run["generation"]["max_new_tokens"] == 24
    assert "humaneval" in text
    # what decoding took, shard by shard, summed, and said by the CLI (the CPU's decoder compiles nothing)
    compute = results["codeeval"]["tasks"]["humaneval"]["compute"]
    (shard,) = compute["shards"]
    assert (shard["shard"], shard["device"], shard["decoder"], shard["compile_cache"], shard["reused"]) == \
        (0, "cpu", "dynamic", "none", False)
    assert shard["compile_s"] == compute["compile_s"] == 0 and shard["decode_s"] == compute["decode_s"] > 0
    assert "decoding: 0.0 s compiling and capturing steps (compile store: 0 found, 0 missed)" in text, text
