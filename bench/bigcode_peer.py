"""codeeval's transformers backend against the real bigcode-evaluation-harness, unmodified.

  python bench/generation.py --bigcode /path/to/bigcode-evaluation-harness [--limit 16]
      [--samples 1,10] [--rounds 1] [--max-length-generation 512] [--batch-rows 0]

Both sides run in fresh processes on the same HF model directory, the same HumanEval prompts
(the first --limit) and bigcode's flags: `--max_length_generation L --precision fp32`, greedy
(`--do_sample False --n_samples 1 --batch_size 1`) at n=1 and `--do_sample True --temperature 0.2
--top_p 0.95 --n_samples 10 --batch_size 10` at n=10, interleaved (bigcode, ours; then the other
order next round). Only generation is timed: ours around `generate`, bigcode's by its own tqdm
bar over the generation loop, whose elapsed seconds `TQDM_BAR_FORMAT` prints exactly.
Tokens/s counts the tokens of each post-processed completion after its prompt (both sides alike).
At n=1 the greedy generations files are compared byte for byte.

Offline set-up, cached in $CODEEVAL_CACHE/bigcode-peer (default ~/.cache/codeeval/bigcode-peer):
* model/: the SmolLM2 GGUF dequantized (fp32) into an HF directory (scripts/fetch-smollm2.py --hf).
* hf/: HF_HOME holding what `load_dataset("openai_humaneval")` leaves in datasets' cache, built by
  datasets' JSON builder from ../shared/data/humaneval (tests/test_multiple_hf.py's recipe).
Both processes get HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1 and OMP_WAIT_POLICY=PASSIVE.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
GGUF = REPO / ".cache" / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
MARK = "[bench-tqdm]"


def cache_root() -> Path:
    return Path(os.environ.get("CODEEVAL_CACHE") or Path.home() / ".cache" / "codeeval") / "bigcode-peer"


def child_env(hf_home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TQDM_"))}
    return {**env, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))}


def python(code: str, env: dict) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])


def ensure_model(root: Path, gguf: Path) -> Path:
    """scripts/fetch-smollm2.py --hf: the dequantized HF directory (the one `transformers serve` serves
    in tests/test_openai_server.py)."""
    out = root / "model"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "fetch-smollm2.py"), "--dir", str(gguf.parent),
                           "--hf", str(out)], env=child_env(root / "hf"), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return out


def ensure_data(root: Path) -> Path:
    hf = root / "hf"
    if not list((hf / "datasets" / "openai_humaneval").glob("openai_humaneval/*/*/dataset_info.json")):
        python(f"""
            from pathlib import Path
            from datasets.packaged_modules.json.json import Json
            b = Json(dataset_name="openai_humaneval", config_name="openai_humaneval", hash="0" * 40,
                     data_files={{"test": {str(DATA / "humaneval" / "HumanEval.jsonl.gz")!r}}})
            b.download_and_prepare()
            root = Path(b.cache_dir).parents[1]
            root.rename(root.with_name("openai_humaneval"))
        """, child_env(hf))
    return hf


def run_bigcode(peer: Path, model: Path, hf: Path, out: Path, n: int, limit: int, max_len: int) -> float:
    """bigcode's main.py; returns the seconds of its generation loop."""
    sample = ["--do_sample", "False", "--n_samples", "1", "--batch_size", "1"] if n == 1 else \
        ["--do_sample", "True", "--temperature", "0.2", "--top_p", "0.95", "--n_samples", str(n), "--batch_size", str(n)]
    cmd = [sys.executable, "main.py", "--model", str(model), "--tasks", "humaneval", "--limit", str(limit),
           "--max_length_generation", str(max_len), *sample, "--precision", "fp32", "--allow_code_execution",
           "--generation_only", "--save_generations", "--save_generations_path", str(out / "generations.json"),
           "--metric_output_path", str(out / "metrics.json")]
    env = dict(child_env(hf), TQDM_BAR_FORMAT=MARK + " {n}/{total} {elapsed_s:.3f}\n")
    done = subprocess.run(cmd, cwd=peer, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bigcode failed:\n{done.stderr[-3000:]}")
    bars = re.findall(re.escape(MARK) + r" (\d+)/(\d+) ([0-9.]+)", done.stderr + done.stdout)
    seconds = [float(s) for k, total, s in bars if int(total) == limit and int(k) == limit]
    if not seconds:
        raise SystemExit(f"bigcode's generation bar not found:\n{done.stderr[-2000:]}")
    return max(seconds)


def run_ours(model: Path, hf: Path, out: Path, n: int, limit: int, max_len: int, rows: int) -> float:
    cmd = [sys.executable, str(Path(__file__).resolve()), "ours", "--model", str(model), "--n", str(n),
           "--limit", str(limit), "--max-length-generation", str(max_len), "--out", str(out / "ours.json"),
           "--batch-rows", str(rows)]
    done = subprocess.run(cmd, env=child_env(hf), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ours failed:\n{done.stderr[-3000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def ours_main(ns) -> None:
    """One timed generation with codeeval's backend, written as bigcode's generations file."""
    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions
    from codeeval.generation import BackendSpec, GenerationArgs
    from codeeval.generation.hf.transformers_backend import TransformersBackend
    from codeeval.pipeline.generate import generate_rows

    task = get_task("humaneval")
    problems = task.load(LoadOptions(data_dir=DATA))
    chosen = problems[:ns.limit]
    args = GenerationArgs(do_sample=ns.n > 1, temperature=0.2, top_p=0.95, n_samples=ns.n, batch_size=ns.n,
                          max_length_generation=ns.max_length_generation, precision="fp32",
                          max_batch_rows=ns.batch_rows)
    backend = TransformersBackend(BackendSpec("transformers", ns.model, args))
    t0 = time.perf_counter()
    rows = generate_rows(task, problems, chosen, {p.task_id: ns.n for p in chosen}, backend)
    seconds = time.perf_counter() - t0
    by_id = {p.task_id: [] for p in chosen}
    for r in sorted(rows, key=lambda r: r["sample"]):
        by_id[r["task_id"]].append(r["completion"])
    Path(ns.out).write_text(json.dumps(list(by_id.values())))
    print(seconds)


def count_tokens(tokenizer, generations: list[list[str]], prompts: list[str]) -> int:
    return sum(len(tokenizer(g[len(p):], add_special_tokens=False)["input_ids"])
               for gens, p in zip(generations, prompts) for g in gens)


def compare(ns) -> int:
    from transformers import AutoTokenizer

    peer = Path(ns.bigcode).resolve()
    if not (peer / "main.py").is_file() or not (peer / "bigcode_eval").is_dir():
        raise SystemExit(f"{peer} is not a bigcode-evaluation-harness checkout (no main.py, bigcode_eval/)")
    root = cache_root()
    model, hf = ensure_model(root, Path(ns.gguf)), ensure_data(root)
    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = [json.loads(line)["prompt"].strip() for line in
               __import__("gzip").open(DATA / "humaneval" / "HumanEval.jsonl.gz", "rt")][:ns.limit]
    print(f"bigcode-evaluation-harness at {peer} against codeeval; model {model} (SmolLM2-135M-Instruct, fp32), "
          f"HumanEval 0-{ns.limit - 1}, max_length_generation {ns.max_length_generation}, "
          f"OMP_WAIT_POLICY=PASSIVE, {os.cpu_count()} CPUs")
    print(f"{'n':>3} {'method':<8} {'tokens':>7} {'seconds':>8} {'tokens/s':>9}", flush=True)
    ratios = {}
    for n in [int(x) for x in ns.samples.split(",")]:
        totals = {"bigcode": [0, 0.0], "ours": [0, 0.0]}
        outs = {}
        for r in range(ns.rounds):
            for method in (("bigcode", "ours") if r % 2 == 0 else ("ours", "bigcode")):
                out = root / "runs" / f"n{n}-{method}"
                out.mkdir(parents=True, exist_ok=True)
                if method == "bigcode":
                    s = run_bigcode(peer, model, hf, out, n, ns.limit, ns.max_length_generation)
                    path = out / "generations_humaneval.json"
                else:
                    s = run_ours(model, hf, out, n, ns.limit, ns.max_length_generation, ns.batch_rows)
                    path = out / "ours.json"
                outs[method] = path.read_bytes()
                totals[method][0] += count_tokens(tokenizer, json.loads(outs[method]), prompts)
                totals[method][1] += s
        for method, (tok, s) in totals.items():
            print(f"{n:>3} {method:<8} {tok:>7} {s:>8.1f} {tok / s:>9.1f}")
        (bt, bs), (ot, os_) = totals["bigcode"], totals["ours"]
        ratios[n] = (ot / os_) / (bt / bs)
        line = f"{n:>3} ratio {ratios[n]:.2f}x tokens/s (time {bs / os_:.2f}x)"
        if n == 1:
            same = outs["bigcode"] == outs["ours"]
            a, b = json.loads(outs["bigcode"]), json.loads(outs["ours"])
            differ = [i for i in range(len(a)) if a[i] != b[i]]
            line += f"; greedy generations byte-identical: {same}" + (f" (problems differing: {differ})" if differ else "")
        print(line, flush=True)
    print(" ".join(f"ratio_n{n}={r:.2f}" for n, r in ratios.items()))
    return 0


def main(argv=None) -> int:
    if argv and argv[0] == "ours":
        ap = argparse.ArgumentParser()
        for flag, kind in (("--model", str), ("--n", int), ("--limit", int), ("--max-length-generation", int),
                           ("--out", str), ("--batch-rows", int)):
            ap.add_argument(flag, type=kind, required=True)
        ours_main(ap.parse_args(argv[1:]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bigcode", required=True, help="a bigcode-evaluation-harness checkout")
    ap.add_argument("--gguf", default=str(GGUF), help="the SmolLM2 GGUF file (make smollm2)")
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--samples", default="1,10")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-length-generation", type=int, default=512)
    ap.add_argument("--batch-rows", type=int, default=0, help="our rows per batch (0 = auto)")
    return compare(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
