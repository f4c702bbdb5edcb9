"""``live_attention``: the compiled decode step attends, per slot, to the blocks of its own
columns (FlexAttention with a block mask made on the device), not to the whole static cache.
Run on the CPU's Inductor; the figures it is for come from bench/gpu.py on a GPU."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_static_decoder import GREEDY, SAMPLED, jobs, llama_dir, static, tiny, tokenizer  # noqa: E402,F401 (fixtures)

from codeeval.generation.hf.kernels import grouped_attention, live_attention  # noqa: E402
from codeeval.generation.hf.static import decode_step
from codeeval.generation.hf.static.slot_cache import SlotCache  # noqa: E402


@pytest.mark.parametrize("kind", ["llama", "qwen2"])  # both grouped-query; qwen2's q/k/v have biases
@torch.inference_mode()
def test_live_attention_decodes_what_the_sdpa_step_decodes(tokenizer, kind):
    """Greedy and seeded sampling, 1 to 8 slots, rows of 1 to 3 blocks of columns refilled by
    shorter ones (an earlier occupant's keys stay in the block past the new row's column): the
    same outputs as the eager step, which reads every column under an additive mask; the forward
    stays one graph (a break would run FlexAttention uncompiled, computing every score)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # Dynamo compiles a code object 8 times at most in a process
    model = tiny(kind, len(tokenizer))
    breaks = sum(counters["graph_break"].values())
    for args in (GREEDY, SAMPLED):
        decoder = static(model, tokenizer, args, compile=True, live_from=2)
        for slots, budgets in ((4, (9, 23, 17, 31, 12)), (8, (100, 5, 5, 5, 5)), (3, (70, 3, 140))):
            decoder.slots_for = lambda length, s=slots: s
            rows = jobs(tokenizer, n=2, budgets=budgets)
            expected = static(model, tokenizer, args, slots=slots).decode(rows)
            assert decoder.decode(rows) == expected and decoder.mode == "compiled+live", (args, slots)
        assert decoder._engine.cache.length > 2 * live_attention.BLOCK  # more than 2 blocks: some were skipped
        # one slot, compiled for exactly one with thin products (a GPU's bf16 default): live too
        alone = static(model, tokenizer, args, compile=True, live_from=1, thin_rows=1, slots=1)
        assert alone.decode(rows) == expected and (alone.mode, alone.slots_used) == ("compiled+live", 1)
    assert sum(counters["graph_break"].values()) == breaks  # FlexAttention inside the one graph, not run apart


@torch.inference_mode()
def test_the_levers_of_the_sampling_step_decode_the_same(tokenizer):
    """Issue 52's two levers, options for bench/gpu.py to measure on a GPU: a query block of 16 rows
    (FlexAttention's BLOCK_M) and live steps compiled per exact slot count (`live_exact`, which a
    CPU always does): the outputs of the SDPA step, in one graph."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    model = tiny("llama", len(tokenizer))
    breaks = sum(counters["graph_break"].values())
    rows = jobs(tokenizer, n=2, budgets=(9, 70, 17, 3))
    for args in (GREEDY, SAMPLED):
        expected = static(model, tokenizer, args, slots=3).decode(rows)
        decoder = static(model, tokenizer, args, compile=True, live_from=2, query_block=16, live_exact=True)
        assert decoder.decode(rows) == expected and decoder.mode == "compiled+live", args
    assert sum(counters["graph_break"].values()) == breaks


@torch.inference_mode()
def test_a_live_step_reads_no_block_past_a_slots_column(tokenizer):
    """NaN in every block past the one that holds each slot's column: the live step's logits are
    those of the clean cache, while the SDPA step, which reads every column, makes NaN of them."""
    torch._dynamo.reset()
    model = tiny("llama", len(tokenizer))
    assert grouped_attention.install(model)
    like = model(input_ids=torch.zeros((2, 5), dtype=torch.long), use_cache=True).cache
    cache = SlotCache(like, 3, 4 * live_attention.BLOCK)
    torch.manual_seed(1)
    for layer in cache.layers:
        layer.keys.normal_()
        layer.values.normal_()
    cache.columns.copy_(torch.tensor([5, 64, 200]))  # blocks 0, 1 and 3: 1, 2 and 4 blocks to read
    tok = torch.tensor([11, 12, 13])
    clean = decode_step.logits(model, tok, cache)
    for slot, column in enumerate(cache.columns.tolist()):
        past = (column // live_attention.BLOCK + 1) * live_attention.BLOCK
        for layer in cache.layers:
            layer.keys[slot, :, past:] = float("nan")
            layer.values[slot, :, past:] = float("nan")
    live = decode_step.compiled(decode_step.live_logits(live_attention.QUERY_BLOCK))(model, tok, cache)
    assert torch.allclose(live, clean, atol=1e-5), (live - clean).abs().max()
    read_all = decode_step.logits(model, tok, cache)
    assert read_all[:2].isnan().all() and torch.equal(read_all[2], clean[2])  # slot 2 has no block past it


@torch.inference_mode()
def test_a_live_step_that_fails_gives_way_to_the_sdpa_step(llama_dir, caplog, monkeypatch):
    """Through the backend's option: a live step that does not compile (FlexAttention on a stack
    or model it does not take) is said once in the log, and the compiled SDPA step decodes the
    same rows, not the uncompiled one, then and at the next shape, where live is not tried again."""
    from codeeval.generation import BackendSpec, GenerationArgs
    from codeeval.generation.hf.transformers_backend import TransformersBackend
    from codeeval.generation.prompts.requests import Job

    torch._dynamo.reset()
    rows = None
    outputs = []
    for broken in (False, True):
        if broken:
            monkeypatch.setattr(live_attention, "block_mask", _no_block_mask)
        spec = BackendSpec("transformers", llama_dir, GenerationArgs(do_sample=False, precision="fp32"), device="cpu",
                           options=(("decoder", "static"), ("compile", "yes"), ("live_attention", "2")))
        backend = TransformersBackend(spec)
        rows = rows or [Job(ids=backend.tokenizer(p)["input_ids"], budget=b, stops=(), seed_key=(f"T/{i}", 0))
                        for i, (p, b) in enumerate((("def add(a, b):", 70), ("x = [", 9), ("import os\n", 30)))]
        with caplog.at_level(logging.WARNING, logger=decode_step.__name__):
            outputs.append(backend.decode_rows(rows))
            assert backend._static.mode == ("compiled" if broken else "compiled+live")
            outputs.append(backend.decode_rows(rows[:2]))  # another engine (2 slots): not tried again
    assert outputs[0] == outputs[2] and outputs[1] == outputs[3]
    said = [r.getMessage() for r in caplog.records if r.name == decode_step.__name__]
    assert said == ["decode step: compiled+live failed (RuntimeError: no block mask here); trying the next way"]


def _no_block_mask(columns, length, query_block):
    raise RuntimeError("no block mask here")
