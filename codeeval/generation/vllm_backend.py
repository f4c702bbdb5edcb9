"""vLLM backend (optional extra: ``pip install 'codeeval[vllm]'``); vllm is imported here only.

Same prompts, budgets and outputs as the transformers backend: prompts are tokenised with
the model's tokenizer (so ``--max_length_generation`` keeps bigcode's meaning and a prompt
that leaves no room is ``prompt_too_long``), each request gets its own ``SamplingParams``
with a per-sample seed (so samples do not depend on batching), stop strings are matched
by vLLM and kept in the output (``include_stop_str_in_output``), special tokens are kept
as bigcode keeps them, and identical greedy requests are generated once. Request
preparation is shared with the transformers backend (codeeval/generation/prompts/requests.py).

Options (``BackendSpec.options``): declared in codeeval/generation/options.py, listed in
docs/generation.md.

Several GPUs: one engine spreads over them with ``tensor_parallel_size``;
:func:`codeeval.generation.hf.devices.plan` never splits a vLLM run into per-device shards
(the shards run as threads of one process, and vLLM picks its GPUs per process).
"""
from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Optional, Sequence

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core.fingerprint import model_fingerprint
from codeeval.core.progress import Progress
from codeeval.generation import options
from codeeval.generation.base import Backend, CallContext, GenOutput, GenRequest, token_budget
from codeeval.generation.models import model_source
from codeeval.generation.prompts.requests import Job, Renderer, plan_jobs
from codeeval.generation.prompts.seeds import sample_seed

log = logging.getLogger(__name__)

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
        opts = options.parse(self.name, spec.options)  # codeeval/generation/options.py
        vllm = _import_vllm()
        self.vllm = vllm
        self.spec = spec
        self.args = a = spec.args
        model = model_source.resolve(spec.model).single_file()  # a GGUF model is one file for vLLM
        kwargs = dict(model=model, revision=a.revision, trust_remote_code=a.trust_remote_code,
                      dtype=VLLM_DTYPES.get(a.precision, a.precision), seed=a.seed,
                      tensor_parallel_size=opts["tensor_parallel_size"],
                      gpu_memory_utilization=opts["gpu_memory_utilization"])
        for name in ("max_model_len", "enforce_eager", "swap_space"):  # else vLLM's own default
            if opts[name] is not None:
                kwargs[name] = opts[name]
        if spec.device and spec.device.startswith("cuda:"):
            _pin_device(spec.device)
        self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.renderer = Renderer(a, spec.model, self.tokenizer)
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

    def _encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"]

    def _params(self, job: Job):
        a = self.args
        kw = dict(n=1, max_tokens=job.budget, stop=list(job.stops) or None, include_stop_str_in_output=True,
                  skip_special_tokens=False, spaces_between_special_tokens=False)
        if a.do_sample:
            kw.update(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k if a.top_k > 0 else -1,
                      seed=sample_seed(a.seed, *job.seed_key))
        else:
            kw.update(temperature=0.0)
        return self.vllm.SamplingParams(**kw)

    def generate(self, task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest],
                 progress: Progress = None, context: Optional[CallContext] = None) -> list[GenOutput]:
        jobs, outputs = plan_jobs(task, problems, requests, self.renderer, self._encode, self._budget,
                                  dedupe=not self.args.do_sample)
        if jobs:
            results = self.llm.generate([{"prompt_token_ids": job.ids} for job in jobs],
                                        [self._params(job) for job in jobs], use_tqdm=False)
            eos = self.eos_text()
            for job, res in zip(jobs, results):
                comp = res.outputs[0]
                if comp.finish_reason == "length":
                    reason = "length"
                elif getattr(comp, "stop_reason", None) is None:
                    reason = "eos"
                else:
                    reason = "stop"
                out = job.output(comp.text, len(comp.token_ids), reason, eos)
                if out.thinking is not None:  # counted apart from the answer (results.json's `thinking`)
                    out = replace(out, thinking_tokens=len(self._encode(out.thinking, False)))
                for i in job.requests:
                    outputs[i] = out
        if progress:
            progress(len(requests))
        return outputs  # type: ignore[return-value]

    def close(self) -> None:
        """Drop the engine and give its GPU memory back (another spec may load on the device)."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is None:
            return
        del llm
        try:  # vLLM's own clean-up of its parallel state; the name moved between versions
            from vllm.distributed import cleanup_dist_env_and_memory

            cleanup_dist_env_and_memory()
        except Exception:  # noqa: BLE001 - older vLLM, or a stub
            try:
                from vllm.distributed import destroy_distributed_environment, destroy_model_parallel

                destroy_model_parallel()
                destroy_distributed_environment()
            except Exception:  # noqa: BLE001
                pass
        import gc

        gc.collect()
        try:
            import torch
        except ImportError:
            return
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _pin_device(device: str) -> None:
    """A spec that names ``cuda:i`` (set by hand, or one process per GPU under a launcher)
    runs its engine on that GPU: vLLM reads CUDA_VISIBLE_DEVICES when it starts CUDA in
    this process, so this works for the process's first engine only."""
    index = int(device.split(":", 1)[1])
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    physical = visible[index] if index < len(visible) else str(index)
    try:
        import torch

        started = torch.cuda.is_initialized()
    except ImportError:
        started = False
    if started and os.environ.get("CUDA_VISIBLE_DEVICES") != physical:
        log.warning("vllm: CUDA is already initialised in this process; %s may not take effect "
                    "(use tensor_parallel_size for several GPUs)", device)
    os.environ["CUDA_VISIBLE_DEVICES"] = physical
