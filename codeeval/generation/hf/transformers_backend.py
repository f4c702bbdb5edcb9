"""The transformers backend: batched decoding across prompts and samples.

How it differs from bigcode-evaluation-harness (which batches `batch_size` copies of one
prompt and pads every prompt to the dataset's longest):

* Rows from different prompts and samples share a batch. Requests are sorted by prompt
  length (longest first, so an out-of-memory shows up at once) and left-padded with an
  attention mask and explicit position ids, so padding never changes a row's result.
* Each row stops on its own: when its decoded continuation holds one of its stop
  strings (bigcode's test, but per row rather than "every row of the batch"), when it
  emits an eos token, or when its budget is spent. Finished rows leave the batch (their
  KV cache rows are dropped), so the batch shrinks instead of idling.
* The budget is per row: ``--max_new_tokens`` when given, else bigcode's
  ``--max_length_generation`` minus the row's own prompt length (never more than the
  model's context). A prompt that leaves no room is reported as ``prompt_too_long``
  (bigcode silently returns the prompt, which scores zero).
* Sampling is inverse-CDF with one counter-based uniform per (seed, task_id, sample, step)
  (codeeval/generation/prompts/seeds.py), so samples do not depend on batch size, device count or
  shard. Greedy requests with the same prompt are decoded once and copied.
* Two decode paths, chosen by the option ``decoder``: ``dynamic`` (codeeval/generation/hf/decoder.py:
  batches that shrink as rows end, a dynamic KV cache, prompt lookup; the default on a CPU, where
  it is the faster) and ``static`` (codeeval/generation/hf/static/static_decoder.py: continuous batching
  over a static KV cache, one CUDA graph per step, no host sync per step; the default on a GPU).
  Their outputs are the same; a model whose cache the static path cannot hold (sliding window,
  linear attention, remote code without ``cache``) is decoded by the dynamic one.

GenOutput.raw is the decoded continuation only (special tokens kept, as bigcode keeps the
eos text for its stop-word cut); n_tokens counts generated tokens; finish_reason is one
of stop, eos, length, prompt_too_long. A free chat answer (``--chat_style free``) is a
row that ends once its first code block closes; the program comes from that block.
``--model`` may be a GGUF file or a directory holding one (codeeval/generation/models/model_source.py).
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from typing import Optional, Sequence

import torch

from codeeval.benchmarks.spec import Problem, TaskSpec
from codeeval.core.fingerprint import model_fingerprint
from codeeval.core.progress import Progress
from codeeval.generation import options
from codeeval.generation.base import Backend, CallContext, GenOutput, GenRequest, token_budget
from codeeval.generation.hf.compile_store import CompileStore
from codeeval.generation.hf.decoder import BatchDecoder
from codeeval.generation.hf.static.settings import StaticSettings
from codeeval.generation.hf.static.static_decoder import StaticDecoder, Unsupported
from codeeval.generation.models import model_source
from codeeval.generation.prompts.requests import Job, Renderer, plan_jobs

log = logging.getLogger(__name__)

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
          "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def default_device(spec_device: Optional[str]) -> torch.device:
    if spec_device:
        return torch.device(spec_device)
    rank = os.environ.get("LOCAL_RANK")  # under `accelerate launch` / torchrun
    if torch.cuda.is_available():
        return torch.device(f"cuda:{int(rank)}" if rank is not None else "cuda")
    return torch.device("cpu")


class TransformersBackend(Backend):
    name = "transformers"

    def __init__(self, spec, model=None, tokenizer=None):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.spec = spec
        self.args = args = spec.args
        self.options = options.parse(self.name, spec.options)  # codeeval/generation/options.py
        if args.precision not in DTYPES:
            raise ValueError(f"--precision must be fp32, fp16 or bf16, not {args.precision!r}")
        dtype = DTYPES[args.precision]
        source = model_source.resolve(spec.model)  # a hub id, a directory, or a GGUF file
        load = dict(revision=args.revision, trust_remote_code=args.trust_remote_code, **source.load_kwargs())
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(source.name_or_path, **load)
        if model is None:
            kwargs = dict(load, dtype=dtype)
            if args.device_map:
                kwargs["device_map"] = args.device_map
            model = AutoModelForCausalLM.from_pretrained(source.name_or_path, **kwargs)
        if args.device_map:
            self.device = next(model.parameters()).device
        else:
            self.device = default_device(spec.device)
            model.to(self.device)
        model.eval()
        self.model = model
        tok = self.tokenizer
        if not tok.eos_token and tok.bos_token:  # bigcode: bos used as eos
            tok.eos_token = tok.bos_token
        self.eos_ids = self._eos_ids()
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (
            self.eos_ids[0] if self.eos_ids else 0)
        cfg = model.config
        self.context = self.options["max_context"] or getattr(cfg, "max_position_embeddings", None) \
            or getattr(cfg, "n_positions", None) or getattr(cfg, "n_ctx", None)
        self.context = int(self.context) if self.context else None
        self._fingerprint = model_fingerprint(spec.model, args.revision)
        self.renderer = Renderer(args, spec.model, self.tokenizer)
        self.stats: dict[str, int] = {}  # decode steps and prompt-lookup drafts, summed over batches
        half = model.dtype in (torch.bfloat16, torch.float16)  # fp32 keeps HF's own products, bit for bit
        self.machine = options.Machine(self.device.type, half)  # what the run-time defaults depend on
        decided = options.resolve(self.name, self.options, self.machine)
        self.decoder = decided["decoder"]
        # Prompt lookup pays on a CPU, where each scored position costs compute. On a GPU a step costs its
        # launches, not its positions: drafts halved a batch of 16's tokens/s and, in bf16, changed greedy
        # output (docs/generation.md, bench/gpu.py).
        self.draft_tokens = decided["prompt_lookup"]
        self._static: Optional[StaticDecoder] = None  # kept across shards: its compiled step and cache

    # -- interface -------------------------------------------------------------------
    def fingerprint(self) -> str:
        return f"transformers:{self._fingerprint}:{self.args.precision}"

    def eos_text(self) -> Optional[str]:
        return self.tokenizer.eos_token or None

    def _eos_ids(self) -> list[int]:
        ids = []
        gc = getattr(self.model, "generation_config", None)
        for source in (getattr(gc, "eos_token_id", None), self.tokenizer.eos_token_id):
            for i in (source if isinstance(source, (list, tuple)) else [source]):
                if i is not None and i not in ids:
                    ids.append(int(i))
        return ids

    # -- prompts ---------------------------------------------------------------------
    def _encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return self.tokenizer(text, add_special_tokens=add_special_tokens, truncation=False)["input_ids"]

    def _budget(self, n_prompt: int) -> int:
        return token_budget(self.args, n_prompt, self.context)

    def _rows_per_batch(self, max_len: int) -> int:
        if self.args.max_batch_rows:
            return max(1, self.args.max_batch_rows)
        rows = self.options["batch_rows"]
        if rows:
            return rows
        if self.device.type == "cuda":
            # use about half of the free memory for the KV cache
            free, _ = torch.cuda.mem_get_info(self.device)
            rows = int(0.5 * free / max(1, self._kv_bytes_per_token() * max_len))
            return max(1, min(256, rows))
        # CPU: past ~16k cached tokens per batch the step time grows faster than the rows
        return max(self.args.batch_size, min(32, max(1, 16384 // max(1, max_len))))

    # -- generation ------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, task: TaskSpec, problems: Sequence[Problem], requests: Sequence[GenRequest],
                 progress: Progress = None, context: Optional[CallContext] = None) -> list[GenOutput]:
        rows, outputs = plan_jobs(task, problems, requests, self.renderer, self._encode, self._budget,
                                  dedupe=not self.args.do_sample)
        done_early = sum(o is not None for o in outputs)
        if done_early and progress:
            progress(done_early)

        ordered = [rows[r] for r in sorted(range(len(rows)), key=lambda r: (-len(rows[r].ids), r))]
        eos = self.eos_text()
        before, began = dict(self.stats), time.perf_counter()
        for row, (text, n_tok, reason) in zip(ordered, self.decode_rows(ordered, progress)):
            out = row.output(text, n_tok, reason, eos)
            if out.thinking is not None:  # counted apart from the answer (results.json's `thinking`)
                out = replace(out, thinking_tokens=len(self._encode(out.thinking, False)))
            for i in row.requests:
                outputs[i] = out
        if context is not None:
            context.compute.update(self._compute(before, time.perf_counter() - began))
        return outputs  # type: ignore[return-value]

    def _compute(self, before: dict, wall: float) -> dict:
        """What this call's decoding took (CallContext.compute): seconds building steps (compiling and
        capturing) and the rest, the compile store's entries found and missed, and so the cache's word:
        hit, miss, in process (compiled by an earlier call of this worker) or none (nothing compiled)."""
        spent = {k: self.stats.get(k, 0) - before.get(k, 0) for k in ("compile_s", "store_hits", "store_misses")}
        compiled = self._static is not None and self._static.compile
        cache = ("miss" if spent["store_misses"] else "hit" if spent["store_hits"]
                 else "in process" if compiled else "none")
        return {"device": self.device.type, "decoder": self.decoder, "compile_s": round(spent["compile_s"], 3),
                "decode_s": round(wall - spent["compile_s"], 3), "compile_cache": cache,
                "store_hits": spent["store_hits"], "store_misses": spent["store_misses"]}

    @torch.inference_mode()
    def decode_rows(self, ordered: list[Job], progress: Progress = None) -> list[tuple[str, int, str]]:
        """(text, n_tokens, finish_reason) per row (rows sorted longest prompt first), by the
        decoder that the option ``decoder`` names; ``progress`` counts the requests done."""
        if ordered and self.decoder == "static":
            results = self._decode_static(ordered, progress)
            if results is not None:
                return results
        results, start = [], 0
        while start < len(ordered):
            size = self._batch_size(ordered, start)
            left = len(ordered) - start
            size = -(-left // -(-left // size))  # balanced: 40 rows at 32 a batch -> 20 + 20
            batch = ordered[start:start + size]
            start += size
            results += self._decode_batch(batch)
            if progress:
                progress(sum(len(r.requests) for r in batch))
        return results

    def _batch_size(self, ordered: list[Job], start: int) -> int:
        """Rows for the batch starting at ``ordered[start]`` (rows sorted longest prompt first).
        The KV cache is sized for the longest prompt plus the largest budget among the batch's
        rows (under --max_length_generation shorter prompts get larger budgets): the batch
        shrinks until the rows it holds fit."""
        longest = len(ordered[start].ids)
        size = min(len(ordered) - start, self._rows_per_batch(longest + max(ordered[start].budget, 1)))
        while True:
            need = longest + max(1, max(r.budget for r in ordered[start:start + size]))
            fit = self._rows_per_batch(need)
            if fit >= size:
                return size
            size = fit

    def _decode_batch(self, batch: list[Job]) -> list[tuple[str, int, str]]:
        """Left-padded batched decoding with per-row stopping (codeeval/generation/hf/decoder.py)."""
        decoder = BatchDecoder(self.model, self.tokenizer, self.args, self.device, self.eos_ids, self.pad_id,
                               draft_tokens=self.draft_tokens,
                               step_tokens=self.options["step_tokens"])
        try:
            return decoder.decode(batch)
        finally:
            for key, value in decoder.stats.items():
                self.stats[key] = self.stats.get(key, 0) + value

    def _decode_static(self, ordered: list[Job], progress: Progress) -> Optional[list[tuple[str, int, str]]]:
        """All rows through one StaticDecoder (continuous batching); None when the model's cache
        does not suit it (the dynamic decoder then runs, now and for later shards)."""
        def finished(j: int) -> None:
            if progress:
                progress(len(ordered[j].requests))

        if self._static is None:
            settings = StaticSettings.resolve(self.options, self.machine)
            self._static = StaticDecoder(
                self.model, self.tokenizer, self.args, self.device, self.eos_ids, self.pad_id, slots=self._slots,
                settings=settings, store=CompileStore.default() if settings.store else None)
        try:
            return self._static.decode(ordered, on_end=finished)
        except Unsupported as exc:
            log.warning("decoder=static: %s; decoding with decoder=dynamic", exc)
            self.decoder, self._static = "dynamic", None
            return None
        finally:
            if self._static is not None:
                for key, value in self._static.stats.items():
                    self.stats[key] = self.stats.get(key, 0) + value
                self._static.stats = dict.fromkeys(self._static.stats, 0)

    def _slots(self, length: int) -> int:
        """Slots of the static decoder for rows of up to ``length`` tokens: as for a batch, and on a
        GPU no more than make the cache read per step 4x the weights (each step reads every
        slot's L columns; past that, more slots add little throughput and a longer tail)."""
        rows = self._rows_per_batch(length)
        if self.device.type != "cuda" or self.args.max_batch_rows or self.options["batch_rows"]:
            return rows
        weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
        return max(1, min(rows, max(16, 4 * weights // max(1, self._kv_bytes_per_token() * length))))

    def _kv_bytes_per_token(self) -> int:
        cfg = self.model.config
        layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", 24)
        hidden = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", 2048)
        heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", 16)
        kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
        head_dim = getattr(cfg, "head_dim", None) or hidden // heads
        return 2 * layers * kv_heads * head_dim * self.model.dtype.itemsize

    def close(self) -> None:
        self._static = None
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
