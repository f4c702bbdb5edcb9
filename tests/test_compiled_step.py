"""The compiled decode step (the GPU default) on the CPU's Inductor: what it costs per step.

On a GPU a decode step reads every weight and every slot's keys and values once, so its time is
its bytes; these tests find on the CPU the costs that an H200 run showed or implied (bench/gpu.py,
docs/generation.md "On a GPU"): a cache written by copying it whole, a grouped-query cache copied
once per query head to be read, and one matrix product per Linear where a layer's q/k/v (and
gate/up) could be one.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).parent))
from test_static_decoder import (GREEDY, SAMPLED, jobs, llama_dir, static, tiny,  # noqa: E402,F401 (fixtures)
                                 tokenizer)

from codeeval.generation.hf.kernels import fused_products, thin_products  # noqa: E402


def storage_bytes(model) -> int:
    storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
    return sum(storages.values())


@pytest.mark.parametrize("kind", ["llama", "qwen2"])  # qwen2: q/k/v have biases
@torch.inference_mode()
def test_fused_groups_make_one_product_each_and_decode_the_same(tokenizer, kind):
    """``fuse_products``: a layer's q/k/v and gate/up become one matrix product each in the
    compiled step (2 layers: 9 products where the model has 15 Linears), the outputs are the
    unfused eager step's (greedy and seeded sampling, fp32), and the model is unchanged to anyone
    reading it: same state_dict, same memory, same eager forward."""
    plain = tiny(kind, len(tokenizer))
    rows = jobs(tokenizer, n=2)
    expected = {args: static(plain, tokenizer, args).decode(rows) for args in (GREEDY, SAMPLED)}
    probe = torch.tensor([tokenizer("def f(x):")["input_ids"]])
    logits = plain(probe).logits
    before, held = {k: v.clone() for k, v in plain.state_dict().items()}, storage_bytes(plain)
    linears = sum(isinstance(m, torch.nn.Linear) for m in plain.modules())

    model = plain  # fused in place by the decoder
    for args in (GREEDY, SAMPLED):
        decoder = static(model, tokenizer, args, compile=True, fuse=True, slots=4)
        assert decoder.decode(rows) == expected[args] and decoder.mode == "compiled"
    assert (linears, products_of_a_step(decoder)) == (15, 9)
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], v) for k, v in before.items())
    assert storage_bytes(model) == held
    assert torch.equal(model(probe).logits, logits)
    assert fused_products.fuse(model) == 0  # fused already: a second call changes nothing


def products_of_a_step(decoder) -> int:
    """The matrix-product calls (aten::mm, aten::addmm) of one replayed step of the decoder's engine."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        decoder._engine.runner.run()
    return sum(e.count for e in prof.key_averages() if e.key in ("aten::mm", "aten::addmm"))


@pytest.mark.parametrize("kind, fuse, wide", [("llama", False, 15), ("qwen2", True, 9)])
@torch.inference_mode()
def test_thin_products_are_reductions_and_decode_the_same(tokenizer, kind, fuse, wide):
    """``thin_products=2``: a step of 1 or 2 slots makes no matrix-product call, each Linear (or
    fused group) being one of Inductor's reductions, while a step of 4 slots makes its products as
    before; all decode what the eager step decodes (greedy and seeded sampling, fp32), and one
    prompt takes one slot."""
    torch._dynamo.reset()  # Dynamo compiles a code object 8 times at most in a process
    model = tiny(kind, len(tokenizer))
    rows = jobs(tokenizer, n=2)
    for args in (GREEDY, SAMPLED):
        expected = static(model, tokenizer, args).decode(rows)
        decoder = static(model, tokenizer, args, compile=True, fuse=fuse, thin_rows=2, slots=2)
        for slots, products in ((1, 0), (2, 0), (4, wide)):
            decoder.slots_for = lambda length, s=slots: s
            assert decoder.decode(rows) == expected and decoder.mode == "compiled", (args, slots)
            assert products_of_a_step(decoder) == products, (args, slots)
        assert decoder.decode(rows[:1]) == expected[:1] and decoder.slots_used == 1  # one prompt: one slot


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_a_thin_product_is_laid_out_as_the_blas_product(rows):
    """A thin product's result has ``mm``'s values and layout (rows x N, contiguous): transposed,
    it reached cuDNN's attention on an H100 as queries with a stride of 2 in their last dimension
    at 2 slots, and that step fell back to running uncompiled."""
    torch.manual_seed(0)
    a, weight = torch.randn(rows, 48), torch.randn(80, 48)
    got, want = thin_products.product(a, weight.t()), a @ weight.t()
    assert got.shape == want.shape and got.stride() == want.stride() and torch.allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("precision, slots, products", [("bf16", 1, 0), ("fp32", 2, 15)])
@torch.inference_mode()
def test_one_prompt_compiled_in_half_precision_takes_one_slot_and_no_blas_product(llama_dir, precision, slots,
                                                                                  products):
    """The backend's defaults for a compiled step: in bf16 (and fp16) a step of one slot makes its
    products as Inductor's reductions and one prompt takes one slot (on an H100, 6% faster than
    cuBLAS's products at 2 slots); in fp32, HF's own products, 2 slots."""
    from codeeval.generation import BackendSpec, GenerationArgs
    from codeeval.generation.hf.transformers_backend import TransformersBackend
    from codeeval.generation.prompts.requests import Job

    torch._dynamo.reset()  # Dynamo compiles a code object 8 times at most in a process
    spec = BackendSpec("transformers", llama_dir, GenerationArgs(do_sample=False, precision=precision),
                       device="cpu", options=(("decoder", "static"), ("compile", "yes")))
    backend = TransformersBackend(spec)
    ids = backend.tokenizer("def add(a, b):")["input_ids"]
    (text, tokens, _), = backend.decode_rows([Job(ids=ids, budget=6, stops=(), seed_key=("T/0", 0))])
    decoder = backend._static
    assert (tokens, decoder.mode, decoder.slots_used, products_of_a_step(decoder)) == (6, "compiled", slots, products)


@torch.inference_mode()
def test_the_tenth_model_of_a_process_decodes_compiled_too(tokenizer):
    """Dynamo compiles one function 8 times at most, then runs it uncompiled with one warning: a
    process that decoded with 8 models (a nightly's, in-process) ran the ninth without Inductor.
    Each decoder's compiled forward counts only its own compilations."""
    torch._dynamo.reset()
    rows = jobs(tokenizer, n=1)[:1]
    for _ in range(10):  # a new model each time, as a nightly loads them
        decoder = static(tiny("llama", len(tokenizer)), tokenizer, GREEDY, compile=True, slots=2)
        decoder.decode(rows)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        decoder._engine.runner.run()
    assert any(e.key.startswith("Torch-Compiled Region") for e in prof.key_averages()), "the step ran uncompiled"


@pytest.mark.parametrize("kv_heads", [4, 2], ids=["one-query-head-per-key-head", "grouped-query"])
def test_the_compiled_step_writes_and_reads_the_cache_in_place(demo_model_dir, kv_heads):
    """A step writes one column per slot into the cache and reads all of it. Compiled, a
    ``scatter_`` there became a new cache-sized tensor per layer, copied back whole (41% of a
    batch-16 step on an H200), and with 2 query heads per key head, transformers' attention
    copied each layer's cache twice over to read it. Measured as the process's peak memory while
    a 1 GiB cache is made and stepped once: the cache, not 1.5x (the scatter) or 2x (the copies)."""
    script = f"""
import dataclasses
import resource
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig
from codeeval.generation import GenerationArgs
from codeeval.generation.hf.static.settings import StaticSettings
from codeeval.generation.hf.static.static_decoder import StaticDecoder
from codeeval.generation.options import Machine
from codeeval.generation.prompts.requests import Job

peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
tok = AutoTokenizer.from_pretrained({demo_model_dir!r})
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads={kv_heads}, max_position_embeddings=1 << 16)).eval()
settings = dataclasses.replace(StaticSettings.resolve({{}}, Machine("cpu")), compile=True)
decoder = StaticDecoder(model, tok, GenerationArgs(do_sample=False), torch.device("cpu"), [], 0, slots=lambda n: 2,
                        settings=settings)
with torch.inference_mode():
    decoder.decode([Job(ids=tok("def f():")["input_ids"], budget=4, stops=(), seed_key=("T/0", 0))])
    like = model(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True).cache
    decoder._engine = None
    before = peak()
    engine = decoder._engine_for(like, {64 * 4 // kv_heads}, 16384)  # made, then one step: its compile's warm-up
    cache = sum(t.numel() * t.element_size() for layer in engine.cache.layers for t in (layer.keys, layer.values))
print(decoder.mode, cache, peak() - before)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    mode, cache, grew = done.stdout.split()[-3:]
    assert mode == "compiled" and int(cache) == 2**30
    assert int(grew) < 1.2 * int(cache), f"a step took {int(grew) / int(cache):.2f}x the cache's memory"
