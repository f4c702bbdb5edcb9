"""What bench/gpu.py measures with: the model shapes, our backend and HF's generate on the same
weights, the clocks, and the figures that explain a decode rate (a step alone, its kernels)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import torch

ARCHS = {  # random-weight shapes of public code models (their config.json): throughput and equality only
    "deepseek-coder-1.3b": dict(hidden_size=2048, intermediate_size=5504, num_hidden_layers=24,
                                num_attention_heads=16, num_key_value_heads=16),
    "deepseek-coder-6.7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,  # its vocab: the
                                num_attention_heads=32, num_key_value_heads=32, rope_theta=100000.0),  # tokenizer's
    "codellama-7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=32),
    "qwen2.5-coder-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,  # grouped-query:
                               num_attention_heads=12, num_key_value_heads=2),  # 6 query heads a key head
    "llama-tiny": dict(hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2),
}
BANDWIDTH_GBS = (("h200", 4800), ("h100", 3350), ("a100", 2039), ("l40", 864))  # vendors' figures


def random_model(arch: str, dtype, out: Path, device: str, tokenizer: Path) -> Path:
    """A real architecture with seeded random weights, saved with the tokenizer as an HF directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    tok = AutoTokenizer.from_pretrained(tokenizer)
    cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=4096, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, **ARCHS[arch])
    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: seconds, not minutes
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def said(exc: BaseException, chars: int = 120) -> str:
    """An error as a figure's line names it: its type and the start of its message."""
    return f"{type(exc).__name__}: {str(exc)[:chars]}"


def sync() -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def peak(reset: bool = False) -> float:
    if not torch.cuda.is_available():
        return 0.0
    gib = torch.cuda.max_memory_allocated() / 2**30
    if reset:
        torch.cuda.reset_peak_memory_stats()
    return gib


class Ours:
    """codeeval's transformers backend on a model directory, fed prepared rows (per-row budgets)."""

    def __init__(self, model_dir: str, precision: str, device: str, options=()):
        from codeeval.generation import BackendSpec, GenerationArgs
        from codeeval.generation.hf.transformers_backend import TransformersBackend

        self.GenerationArgs = GenerationArgs
        args = GenerationArgs(precision=precision)
        self.b = TransformersBackend(BackendSpec("transformers", model_dir, args, device=device, options=tuple(options)))
        self.eos = list(self.b.eos_ids)

    def run(self, rows, eos: bool = False, **args):
        """(results, seconds of the call, the decoder's stats of the call: decode_s, steps, ...)."""
        self.b.args = self.GenerationArgs(precision=self.b.args.precision, **args)
        if self.b._static is not None:
            self.b._static.args = self.b.args
        self.b.eos_ids[:] = self.eos if eos else []  # the decoders hold this list
        before = dict(self.b.stats)
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i].ids))
        t0 = sync()
        out = self.b.decode_rows([rows[i] for i in order])
        wall = sync() - t0
        results = [None] * len(rows)
        for i, r in zip(order, out):
            results[i] = r
        return results, wall, {k: v - before.get(k, 0) for k, v in self.b.stats.items()}


def decode_rate(ours: Ours, tok, items, new: int, label: str) -> float:
    """Greedy decode tokens/s of one warmed-up call, one row per item: the tokens after each
    row's first over the seconds of its step loop."""
    rows = jobs(tok, items, [new] * len(items))
    warm = ours.run(rows, do_sample=False)[1]  # warm-up: compile (the first time), capture
    res, wall, stats = ours.run(rows, do_sample=False)
    rate = sum(n - 1 for _, n, _ in res) / stats["decode_s"]
    print(f"{label} (decoder=static, {ours.b._static.mode}) decode, batch {len(items)}: {rate:.1f} tokens/s "
          f"({wall:.2f} s for the call, {stats['decode_s']:.2f} s in the step loop; the first call with its "
          f"compile and capture {warm:.1f} s)", flush=True)
    return rate


def jobs(tok, items, budgets, n=1):
    from codeeval.generation.prompts.requests import Job

    return [Job(ids=tok(it["prompt"].strip())["input_ids"], budget=b, stops=(), seed_key=(it["task_id"], s))
            for it, b in zip(items, budgets) for s in range(n)]


def hf_generate(model, tok, prompts: list[str], device, **kw) -> list[list[int]]:
    """HF `generate` on a left-padded batch; the new token ids of each row."""
    enc = tok(prompts, return_tensors="pt", padding=True).to(device)
    with torch.no_grad():
        out = model.generate(**enc, pad_token_id=tok.pad_token_id, **kw)
    return out[:, enc["input_ids"].shape[1]:].tolist()


def step_alone(ours: Ours, weight_bytes: int, bw: float, tables: Optional[Path] = None, steps: int = 64) -> float:
    """The last run's step replayed alone, without the loop around it: its time, and the bytes it
    must read (every weight; every slot's L columns of keys and values, or with live attention the
    blocks up to its column) over that time. A loop
    far slower than its step is the host's cost; a step far from the bandwidth is the kernels'.
    Returns the step's share of the bandwidth."""
    eng = ours.b._static._engine
    live = "live" in ours.b._static.mode
    before = live_columns(eng) if live else 0
    with torch.inference_mode():  # as the decoder runs it (a plain call on the CPU)
        t0 = sync()
        for _ in range(steps):
            eng.runner.run()
        each = (sync() - t0) / steps
    slots, length = eng.cache.slots, eng.cache.length
    columns = (before + live_columns(eng)) / 2 if live else slots * length  # live: its columns grew by `steps`
    kv = columns * ours.b._kv_bytes_per_token()
    print(f"  its step alone ({ours.b._static.mode}, {slots} slots x {length} columns): {each * 1e3:.3f} ms; "
          f"{(weight_bytes + kv) / 1e9:.2f} GB to read ({kv / 1e9:.2f} of them keys and values) "
          f"= {(weight_bytes + kv) / each / 1e12:.2f} TB/s, {(weight_bytes + kv) / each / bw:.0%} of the bandwidth",
          flush=True)
    for figure, extra in ((kernels, (tables,)), (matmuls, ())):
        try:
            figure(eng, ours.b.model, bw, *extra)
        except Exception as exc:  # noqa: BLE001 - a figure that explains, not one the run needs
            print(f"  {figure.__name__}: not measured ({said(exc)})", flush=True)
    return (weight_bytes + kv) / each / bw


def live_columns(eng) -> int:
    """The columns a live-attention step reads: each slot's blocks up to the one holding its column."""
    from codeeval.generation.hf.kernels import live_attention

    return int(live_attention.blocks_read(eng.cache.columns).sum()) * live_attention.BLOCK


def kernels(eng, model, bw: float, tables: Optional[Path] = None, steps: int = 4) -> None:
    """The kernels of a step as the profiler sees them (inside the graph too): how many, and
    where the time goes. Hundreds of short ones mean launch gaps; one long one, that kernel.
    With ``tables``, every kernel's count and time a step go to a file there too (the device
    call's $OUT): what the next change aims at, read without another lent run."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CUDA] if torch.cuda.is_available() else [ProfilerActivity.CPU]
    with torch.inference_mode(), profile(activities=activities) as prof:
        for _ in range(steps):
            eng.runner.run()
        sync()
    cuda = torch.cuda.is_available()
    spent = (lambda e: e.self_device_time_total) if cuda else (lambda e: e.self_cpu_time_total)  # noqa: E731
    rows = [e for e in prof.key_averages() if e.device_type.name == ("CUDA" if cuda else "CPU") and spent(e) > 0]
    total = sum(spent(e) for e in rows) or 1
    ranked = sorted(rows, key=lambda e: -spent(e))
    top = ranked[:6]
    if tables is not None:
        tables.mkdir(parents=True, exist_ok=True)
        name = tables / f"kernels-{len(list(tables.glob('kernels-*.tsv'))) + 1:02d}-{eng.cache.slots}-slots.tsv"
        name.write_text("kernel\tcalls a step\tus a step\tshare\n" + "".join(
            f"{e.key}\t{e.count / steps:g}\t{spent(e) / steps:.2f}\t{spent(e) / total:.4f}\n" for e in ranked))
        print(f"  its kernels, each: {name}", flush=True)
    print(f"  its kernels: {sum(e.count for e in rows) / steps:.0f} a step, {total / steps / 1e3:.3f} ms of "
          f"{'kernel' if cuda else 'op'} time a step; most: "
          + "; ".join(f"{e.key[:48]} x{e.count // steps} {spent(e) / total:.0%}"
                                            for e in top), flush=True)


def matmuls(eng, model, bw: float, steps: int = 32) -> None:
    """The step's matrix products alone, as the BLAS runs them for this many slots (one graph on
    a GPU): as the model has them, and with each layer's q/k/v and gate/up matrices made one; on a
    GPU with Triton and <= 16 slots, also bench/gemv.py's kernel on the fused matrices, and with <= 4
    slots Inductor's reductions (thin_products) on them. The first is the floor of a step made of the
    model's own products, the second what fusing buys, the others how near the bandwidth a kernel
    not cuBLAS's gets."""
    linears = [(name, m.weight) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    from codeeval.generation.hf.kernels.fused_products import GROUPS

    fusable = {name: group for group in GROUPS for name in group}  # the groups the backend fuses
    groups: dict[tuple, list] = {}
    for name, w in linears:
        prefix, _, leaf = name.rpartition(".")
        groups.setdefault((prefix, fusable.get(leaf, leaf)), []).append(w)
    slots = eng.cache.slots
    fused = [torch.cat(ws) if len(ws) > 1 else ws[0] for ws in groups.values()]
    variants = {"as the model has them": ([w for _, w in linears], torch.nn.functional.linear),
                "q/k/v and gate/up fused": (fused, torch.nn.functional.linear)}
    try:
        from gemv import gemv, triton

        if triton is not None and torch.cuda.is_available() and slots <= 16:
            variants["fused, Triton's (bench/gemv.py)"] = (fused, gemv)
    except Exception as exc:  # noqa: BLE001 - a figure that explains, not one the run needs
        print(f"  bench/gemv.py: not loaded ({said(exc)})", flush=True)
    if torch.cuda.is_available() and slots <= 4:
        variants["fused, Inductor's reductions (thin_products)"] = (fused, thin_product(slots))
    xs = {w.shape[1]: torch.randn(slots, w.shape[1], device=w.device, dtype=w.dtype) for _, w in linears}
    nbytes = sum(w.numel() * w.element_size() for _, w in linears)
    line = []
    for label, (ws, product) in variants.items():
        try:
            each, wrong = _products_time(ws, product, xs, steps)
        except Exception as exc:  # noqa: BLE001 - one variant's failure leaves the others' figures
            line.append(f"{label}: failed ({said(exc)})")
            continue
        line.append(f"{label}: {len(ws)} products {each * 1e3:.3f} ms, {nbytes / each / 1e12:.2f} TB/s "
                    f"({nbytes / each / bw:.0%})" + (f", WRONG by up to {wrong:.3g}" if wrong > 0.05 else ""))
    print(f"  its matrix products alone ({slots} slots): " + "; ".join(line), flush=True)


def thin_product(rows: int):
    """x @ w.T compiled as the decode step's thin products are (one graph per shape, each tuned),
    with a code object of its own per figure, as the decoder's: Dynamo compiles one code object 8
    times at most, and on an H100 the second figure's (2 slots) last shapes ran as cuBLAS's."""
    from codeeval.generation.hf.kernels import thin_products
    from codeeval.generation.hf.static.decode_step import own_code

    def linear(x, w):
        return torch.nn.functional.linear(x, w)

    return torch.compile(own_code(linear), dynamic=False, options=thin_products.inductor_options(rows))


def _products_time(ws, product, xs, steps: int) -> tuple[float, float]:
    """Seconds per pass over ``ws`` (one CUDA graph on a GPU), and the largest difference of
    ``product``'s results from torch's own products."""
    def products() -> None:
        for w in ws:
            product(xs[w.shape[1]], w)

    run = products
    with torch.inference_mode():
        wrong = max((product(xs[w.shape[1]], w).float() - torch.nn.functional.linear(xs[w.shape[1]], w).float())
                    .abs().max().item() for w in ws)
        if torch.cuda.is_available():
            from codeeval.generation.hf.static.decode_step import capture

            run = capture(products, torch.device("cuda"), warmup=1).replay
        run()
        t0 = sync()
        for _ in range(steps):
            run()
        return (sync() - t0) / steps, wrong

