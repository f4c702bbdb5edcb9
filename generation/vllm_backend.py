"""vLLM backend (optional extra: ``pip install 'codeeval[vllm]'``); vllm is imported here only.

Same prompts, budgets and outputs as the transformers backend: prompts are tokenised with
the model's tokenizer (so ``--max_length_generation`` keeps bigcode's meaning and a prompt
that leaves no room is ``prompt_too_long``), each request gets its own ``SamplingParams``
with a per-sample seed (so samples do not depend on batching), stop strings are matched
by vLLM and kept in the output (``include_stop_str_in_output``), special tokens are kept
as bigcode keeps them, and identical greedy requests are generated once.

Options (``BackendSpec.options``): tensor_parallel_size, gpu_memory_utilization,
max_model_len, enforce_eager, swap_space.
"""
from __future__ import annotations

from typing import Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.generation import chat, fim
from codeeval.generation.base import Backend, GenOutput, GenRequest, Progress, token_budget
from codeeval.generation.seeds import sample_seed
from codeeval.fingerprint import model_fingerprint

VLLM_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _import_vllm():
    try:
        import vllm
    except ImportError as e:
        raise ImportError("the vllm backend needs the optional extra: pip install 'codeeval[vllm]' "
                          f"({e})") from e
    return vllm


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, spec):
        vllm = _import_vllm()
        self.vllm = vllm
        self.spec = spec
        self.args = a = spec.args
        opts = dict(spec.options)
        kwargs = dict(model=spec.model, revision=a.revision, trust_remote_code=a.trust_remote_code,
                      dtype=VLLM_DTYPES.get(a.precision, a.precision), seed=a.seed,
                      tensor_parallel_size=int(opts.get("tensor_parallel_size", 1)),
                      gpu_memory_utilization=float(opts.get("gpu_memory_utilization", 0.9)))
        if opts.get("max_model_len"):
            kwargs["max_model_len"] = int(opts["max_model_len"])
        if opts.get("enforce_eager"):
            kwargs["enforce_eager"] = str(opts["enforce_eager"]).lower() in ("1", "true", "yes")
        if opts.get("swap_space"):
            kwargs["swap_space"] = float(opts["swap_space"])
        if spec.device and spec.device.startswith("cuda:"):
            import os

            # one engine per device shard; must be set before vLLM initialises CUDA
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", spec.device.split(":", 1)[1])
        self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        try:
            self.context = int(self.llm.llm_engine.model_config.max_model_len)
        except Exception:  # noqa: BLE001 - engine layout differs between vLLM versions
            self.context = None
        self._fingerprint = model_fingerprint(spec.model, a.revision)

    def fingerprint(self) -> str:
        return f"vllm:{self._fingerprint}:{self.args.precision}"

    def eos_text(self) -> Optional[str]:
        return getattr(self.tokenizer, "eos_token", None) or None

    def _budget(self, n_prompt: int) -> int:
        return token_budget(self.args, n_prompt, self.context)

    def _params(self, req: GenRequest, budget: int, stops):
        a = self.args
        kw = dict(n=1, max_tokens=budget, stop=list(stops) or None, include_stop_str_in_output=True,
                  skip_special_tokens=False, spaces_between_special_tokens=False)
        if a.do_sample:
            kw.update(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k if a.top_k > 0 else -1,
                      seed=sample_seed(a.seed, req.task_id, req.sample))
        else:
            kw.update(temperature=0.0)
        return self.vllm.SamplingParams(**kw)

    def generate(self, task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest],
                 progress: Progress = None) -> list[GenOutput]:
        by_id = {p.task_id: p for p in problems}
        outputs: list[Optional[GenOutput]] = [None] * len(requests)
        prompts, params, jobs, modes = [], [], [], []
        seen: dict[tuple, int] = {}
        for i, req in enumerate(requests):
            problem = by_id.get(req.task_id)
            parts = fim.fim_parts(task, problem) if problem is not None else None
            fmt = None
            if parts is not None:
                fmt = fim.get_format(self.args.fim_format, self.spec.model, self.tokenizer.get_vocab())
                rendered = chat.Rendered(fim.render(fmt, parts[0], parts[1], self.args.prefix), "fim")
            else:
                rendered = chat.render(req.prompt, self.args, task, problem, self.tokenizer)
            ids = self.tokenizer(rendered.text, add_special_tokens=rendered.add_special_tokens)["input_ids"]
            budget = self._budget(len(ids))
            if budget <= 0:
                outputs[i] = GenOutput("", 0, "prompt_too_long")
                continue
            stops = tuple(dict.fromkeys(tuple(req.stop) + (fmt.end if fmt else ())))
            key = (rendered.text, budget, stops)
            if not self.args.do_sample and key in seen:
                jobs[seen[key]].append(i)
                continue
            seen[key] = len(jobs)
            prompts.append({"prompt_token_ids": ids})
            params.append(self._params(req, budget, stops))
            jobs.append([i])
            modes.append((rendered.mode, fmt))
        if prompts:
            results = self.llm.generate(prompts, params, use_tqdm=False)
            for idx, (mode, fmt), res in zip(jobs, modes, results):
                comp = res.outputs[0]
                raw = comp.text
                if fmt is not None:
                    raw = fim.cut_middle(fmt, raw, self.eos_text())
                else:
                    raw = chat.finish_continuation(raw, mode)
                if comp.finish_reason == "length":
                    reason = "length"
                elif getattr(comp, "stop_reason", None) is None:
                    reason = "eos"
                else:
                    reason = "stop"
                for i in idx:
                    outputs[i] = GenOutput(raw, len(comp.token_ids), reason)
        if progress:
            progress(len(requests))
        return outputs  # type: ignore[return-value]
