"""Which prompting gives an instruct model its best honest score (greedy), per style.

Styles, on the same problems, through the transformers backend (the model loaded once):

* plain: bigcode's raw prompt, no chat template;
* prefill: ``--apply_chat_template --chat_style prefill`` (the answer is pre-filled with a
  code fence and the prompt; the model continues the prompt);
* free: ``--apply_chat_template --chat_style free`` (the model answers; the program comes
  from the first fenced code block).

Each style's programs run in the sandbox. Printed per style: pass@1, problems, the share of
executed candidates that parse as Python (``ast.parse``), generated tokens, generation
seconds and tokens/s. ``--dump DIR`` writes each style's rows as JSONL.

  python bench/chat_prompting.py --limit 40            # SmolLM2 (make smollm2), docker sandbox
"""
from __future__ import annotations

import argparse
import ast
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(REPO / ".cache" / "models" / "SmolLM2-135M-Instruct"))
    ap.add_argument("--task", default="humaneval")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--limit-start", type=int, default=0)
    ap.add_argument("--styles", default="plain,prefill,free")
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--executor", default="docker", choices=["docker", "local"])
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    ap.add_argument("--dump", default=None, help="directory for <style>.jsonl rows")
    ns = ap.parse_args(argv)

    import torch

    from codeeval.benchmarks.registry import get_task
    from codeeval.benchmarks.spec import LoadOptions
    from codeeval.executors import SandboxSpec, open_sandbox
    from codeeval.generation import BackendSpec, GenerationArgs
    from codeeval.generation.hf.transformers_backend import TransformersBackend
    from codeeval.pipeline.execute import execute_rows
    from codeeval.pipeline.generate import generate_rows

    task = get_task(ns.task)
    problems = task.load(LoadOptions(data_dir=Path(ns.data_dir)))[ns.limit_start:ns.limit_start + ns.limit]
    counts = {p.task_id: 1 for p in problems}
    loaded = None
    print(f"model {ns.model}, {ns.task} problems {len(problems)} (from {ns.limit_start}), greedy, "
          f"max_new_tokens {ns.max_new_tokens}, torch threads {torch.get_num_threads()}")
    print(f"{'style':<8} {'pass@1':>7} {'passed':>7} {'parse':>6} {'tokens':>7} {'seconds':>8} {'tokens/s':>9}")
    for style in ns.styles.split(","):
        args = GenerationArgs(do_sample=False, max_new_tokens=ns.max_new_tokens, apply_chat_template=style != "plain",
                              chat_style="prefill" if style == "plain" else style)
        spec = BackendSpec("transformers", ns.model, args)
        backend = TransformersBackend(spec, *(loaded or ()))
        loaded = (backend.model, backend.tokenizer)
        t0 = time.perf_counter()
        rows = generate_rows(task, problems, problems, counts, backend)
        seconds = time.perf_counter() - t0
        with open_sandbox(SandboxSpec(ns.executor)) as box:
            execs = execute_rows(task, problems, rows, box)
        passed = sum(e["passed"] for e in execs)
        parsed = sum(parses(r["completion"]) for r in rows)
        tokens = sum(r["n_tokens"] for r in rows)
        print(f"{style:<8} {passed / len(rows):>7.4f} {passed:>4}/{len(rows):<3} {parsed / len(rows):>6.2f} "
              f"{tokens:>7} {seconds:>8.1f} {tokens / seconds:>9.1f}", flush=True)
        if ns.dump:
            Path(ns.dump).mkdir(parents=True, exist_ok=True)
            with open(Path(ns.dump) / f"{style}.jsonl", "w") as fh:
                for r, e in zip(rows, execs):
                    fh.write(json.dumps({**r, "status": e["status"], "stderr_tail": e["stderr_tail"]}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
