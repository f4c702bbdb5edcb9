"""On a GPU: decode speed against the memory-bandwidth roofline, and one greedy output across backends.

Not a test (no test may need a GPU): run it on a lent GPU machine, by hand.

For a model (an HF directory with --model, or a real architecture with random weights with
--arch, saved to a directory first so that every backend loads it the ordinary way) and the
first --problems HumanEval prompts (stripped, as bigcode sends them) it
  1. generates --max-new-tokens greedy tokens per prompt with no stop word and no eos through
     each backend: codeeval's transformers backend (all prompts in one batch), Hugging Face's
     plain `generate` one prompt at a time (bigcode's loop: the reference greedy output), and
     codeeval's vLLM backend when vllm imports; prints how many continuations are byte-identical
     to the reference's and where the first difference is;
  2. times decoding through codeeval's transformers backend at batch 1 and at batch --problems:
     decode tokens/s = (N - 1) new tokens / (time for N - time for 1 new token), so the prompt's
     prefill is left out;
  3. prints the roofline: a decode step reads every weight once, so at batch 1 tokens/s can be
     at most bandwidth / bytes of weights; the fraction reached is tokens/s x bytes / bandwidth.

    python bench/gpu.py --tokenizer DIR --humaneval HumanEval.jsonl.gz --arch deepseek-coder-1.3b
    python bench/gpu.py --model DIR --humaneval HumanEval.jsonl.gz          # a real checkpoint
Last line: `decode_tps_b1=... roofline_fraction=... greedy_identical=<k>/<n> (backend)`.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# random-weight shapes of public code models (config.json of each): throughput and equality only
ARCHS = {
    "deepseek-coder-1.3b": dict(hidden_size=2048, intermediate_size=5504, num_hidden_layers=24,
                                num_attention_heads=16, num_key_value_heads=16),
    "codellama-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=32),
    "llama-tiny": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                       num_attention_heads=8, num_key_value_heads=4),
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
BANDWIDTH_GBS = (("h200", 4800), ("h100", 3350), ("a100", 2039), ("l40", 864))  # vendors' figures


def prompts(path: Path, limit: int) -> list[tuple[str, str]]:
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [(r["task_id"], r["prompt"].strip()) for r in rows[:limit]]


def saved_random_model(arch: str, tokenizer_dir: str, dtype, out: Path, device: str) -> Path:
    """A real architecture with seeded random weights, saved with the tokenizer as an HF directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=4096, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, **ARCHS[arch])
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: seconds, not minutes, for 7B
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.save_pretrained(out)
    del model
    tok.save_pretrained(out)
    return out


def backend_of(kind: str, model_dir: str, precision: str, max_new: int, device: str, options=()):
    from codeeval.generation import BackendSpec, GenerationArgs, backend_class

    args = GenerationArgs(do_sample=False, max_new_tokens=max_new, precision=precision)
    return backend_class(kind)(BackendSpec(kind, model_dir, args, device=device, options=tuple(options)))


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def generate(backend, items: list[tuple[str, str]], max_new: int) -> tuple[list[str], float]:
    """Continuations of `items` (no stop word, no eos: every row runs to max_new) and seconds."""
    from codeeval.benchmarks.spec import Problem, TaskSpec
    from codeeval.generation import GenRequest

    problems = [Problem(tid, i, p, {}) for i, (tid, p) in enumerate(items)]
    task = TaskSpec("humaneval", "humaneval", lambda o: problems, (), lambda p, r, e: r, lambda p, c: c,
                    lambda p: "")
    backend.args = dataclasses.replace(backend.args, max_new_tokens=max_new)
    if hasattr(backend, "eos_ids"):
        backend.eos_ids = []
    sync()
    t0 = time.perf_counter()
    outs = backend.generate(task, problems, [GenRequest(p.task_id, 0, p.prompt, ()) for p in problems])
    sync()
    return [o.raw for o in outs], time.perf_counter() - t0


def hf_reference(model_dir: str, dtype, items, max_new: int, device: str) -> list[str]:
    """Hugging Face's own greedy `generate`, one prompt at a time (what bigcode's loop runs)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device).eval()
    out = []
    for _, prompt in items:
        ids = tok(prompt, return_tensors="pt").to(device)
        with torch.no_grad():
            gen = model.generate(**ids, do_sample=False, max_new_tokens=max_new, min_new_tokens=max_new,
                                 pad_token_id=tok.eos_token_id)
        out.append(tok.decode(gen[0, ids["input_ids"].shape[1]:], skip_special_tokens=False))
    del model
    return out


def same(name: str, texts: list[str], reference: list[str], items) -> int:
    equal = sum(a == b for a, b in zip(texts, reference))
    line = f"greedy {name}: {equal}/{len(reference)} continuations byte-identical to HF generate"
    for (tid, _), a, b in zip(items, texts, reference):
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            line += f"; first difference {tid} at character {at}: {a[at:at + 30]!r} vs {b[at:at + 30]!r}"
            break
    print(line, flush=True)
    return equal


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="an HF model directory")
    ap.add_argument("--arch", choices=sorted(ARCHS), help="random weights of this shape instead")
    ap.add_argument("--tokenizer", help="tokenizer directory for --arch")
    ap.add_argument("--humaneval", type=Path, required=True, help="HumanEval.jsonl.gz")
    ap.add_argument("--precision", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--problems", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--prompt-lookup", type=int, default=None, help="the transformers backend's draft tokens "
                    "(backend option prompt_lookup; default: the backend's own)")
    ns = ap.parse_args(argv)
    if ns.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("bench/gpu.py: no CUDA device (--device cpu for a dry run)")
    dtype = DTYPES[ns.precision]
    tmp = tempfile.TemporaryDirectory(prefix="codeeval-gpu-")
    if ns.arch:
        model_dir = str(saved_random_model(ns.arch, ns.tokenizer, dtype, Path(tmp.name) / ns.arch, ns.device))
        label = f"{ns.arch} shape, random weights"
    else:
        model_dir, label = ns.model, ns.model
    items = prompts(ns.humaneval, ns.problems)
    name = torch.cuda.get_device_name() if ns.device.startswith("cuda") else "cpu"
    bw = next((g for key, g in BANDWIDTH_GBS if key in name.lower()), 1000) * 1e9
    print(f"device: {name}, torch {torch.__version__}; model: {label}, {ns.precision}; "
          f"{len(items)} HumanEval prompts, {ns.max_new_tokens} new tokens each", flush=True)

    reference = hf_reference(model_dir, dtype, items, ns.max_new_tokens, ns.device)
    options = [] if ns.prompt_lookup is None else [("prompt_lookup", str(ns.prompt_lookup))]
    ours = backend_of("transformers", model_dir, ns.precision, ns.max_new_tokens, ns.device, options)
    weight_bytes = sum(p.numel() * p.element_size() for p in ours.model.parameters())
    texts, _ = generate(ours, items, ns.max_new_tokens)
    identical = {"transformers": same("transformers (one batch)", texts, reference, items)}
    alone = [generate(ours, [item], ns.max_new_tokens)[0][0] for item in items]
    identical["transformers-alone"] = same("transformers (one prompt a batch)", alone, reference, items)

    for _ in range(3):
        generate(ours, items[:1], 32)  # warm-up: kernels chosen, clocks up
    rates = {}
    for batch in (1, len(items)):
        _, t1 = generate(ours, items[:batch], 1)
        _, tn = generate(ours, items[:batch], ns.max_new_tokens)
        rates[batch] = batch * (ns.max_new_tokens - 1) / max(tn - t1, 1e-9)
        print(f"transformers decode, batch {batch}: {rates[batch]:.1f} tokens/s "
              f"({tn:.2f} s for {ns.max_new_tokens} tokens, {t1:.3f} s for 1)", flush=True)
    ceiling = bw / weight_bytes
    fraction = rates[1] / ceiling
    print(f"roofline: {weight_bytes / 1e9:.2f} GB of weights per step / {bw / 1e12:.1f} TB/s = {ceiling:.0f} "
          f"tokens/s at batch 1; reached {fraction:.1%} (batch {len(items)}: {rates[len(items)] / ceiling:.1f}x "
          "the batch-1 ceiling, weights read once per step for every row)", flush=True)
    del ours

    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        print(f"vllm: not importable here ({exc}); only the transformers backend was compared", flush=True)
    else:
        texts, _ = generate(backend_of("vllm", model_dir, ns.precision, ns.max_new_tokens, ns.device),
                            items, ns.max_new_tokens)
        identical["vllm"] = same("vllm", texts, reference, items)
    summary = " ".join(f"{k}:{v}/{len(items)}" for k, v in identical.items())
    print(f"decode_tps_b1={rates[1]:.1f} roofline_fraction={fraction:.3f} greedy_identical={summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
