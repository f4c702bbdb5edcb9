"""Continuous batching over a static KV cache: the decode path for a GPU.

* S slots (codeeval/generation/hf/static/slot_cache.py) hold one row each. When a row ends, its slot takes
  the next waiting row, so a batch never waits for its longest row. Rows are started longest
  first (prompt + budget), so the last ones to start are short.
* A step has fixed shapes and never waits for the host: the forward of every slot's newest
  token, the choice of the next one (argmax, or the inverse-CDF draw with the row's
  counter-based uniform computed on the device: sampling.uniforms) and the bookkeeping all stay
  on the device. On a GPU the step is one CUDA graph replay (codeeval/generation/hf/static/decode_step.py).
* Every k steps the tokens of those steps are copied to the host without blocking. The host
  reads each window one window late (its copy finished while the GPU ran the next k steps),
  feeds the tokens to stopping.RowEnds (eos, stop strings and budget, token by token) and drops
  what a row produced past its end, so the output is that of one-token-a-step decoding. A row's
  budget end is known in advance: its slot is refilled as soon as its last token is produced.
* Rows of one prompt share its prefill: prompts are prefilled in groups as the queue reaches
  them, their keys and values are copied into their rows' slots, and each row's first token is
  drawn from the prompt's last logits with the row's own uniform for step 0.
* Out of memory (the cache, the capture, a prefill, a step): everything is released, the slots
  are halved, and the rows not finished yet start again from their prompts. Their tokens
  depend only on (prompt, seed, step), so the shard's output is complete and the same.
"""
from __future__ import annotations

import gc
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from codeeval.generation.hf import compile_store
from codeeval.generation.hf.compile_store import CompileStore
from codeeval.generation.hf.kernels.live_attention import BLOCK
from codeeval.generation.hf.prefill import cache_argument, prefill
from codeeval.generation.hf.sampling import choose, uniforms
from codeeval.generation.hf.static import decode_step, slot_cache
from codeeval.generation.hf.static.decode_step import HostCopy, SlotState
from codeeval.generation.hf.static.settings import StaticSettings
from codeeval.generation.prompts.requests import Job
from codeeval.generation.prompts.seeds import sample_seed
from codeeval.generation.prompts.stopping import RowEnds

log = logging.getLogger(__name__)


class Unsupported(Exception):
    """The model's cache is not plain full attention (sliding window, linear attention, remote code)."""


@dataclass
class _Occupant:
    row: int
    start: int  # the first step whose token is this row's (its first token came from the prefill)
    last: int  # the last step that can produce one of its tokens: start + budget - 2
    first: tuple  # (HostCopy of the refill's first tokens, index)
    fed_first: bool = False


@dataclass
class _Prompt:
    cache: object  # the prefill's DynamicCache (shared by its group)
    row: int
    start: int  # first column of the prompt in it (left padding before)
    logits: torch.Tensor
    rows_left: int


class StaticDecoder:
    """Kept by the backend across batches: its compiled forward and its last engine (cache and
    captured step) are reused when the next batch has the same shape."""

    def __init__(self, model, tokenizer, args, device, eos_ids: list[int], pad_id: int,
                 slots: Callable[[int], int], settings: StaticSettings, store: Optional[CompileStore] = None,
                 on_step: Optional[Callable[[int, int], None]] = None):
        self.model, self.tokenizer, self.args, self.device = model, tokenizer, args, torch.device(device)
        self.eos_ids, self.pad_id, self.slots_for = eos_ids, pad_id, slots
        self.settings = settings
        self.check_every, self.compile, self.graph = max(1, settings.check_every), settings.compile, settings.graph
        self.compile_mode, self.thin_rows, self.fuse = settings.compile_mode, settings.thin_rows, settings.fuse
        self.store = store if self.compile else None  # compiled steps from the team's storage (compile_store.py)
        self.live_from = 0  # steps of at least this many slots try live attention (0: none)
        if self.compile:
            from codeeval.generation.hf.kernels import fused_products, grouped_attention

            if grouped_attention.install(model):  # grouped-query models: no copy of the cache per query head
                self.live_from = settings.live_from  # a block mask reaches live attention through it
            if self.fuse:
                fused_products.fuse(model)  # the weights become views of one matrix per group: memory as before
        self.prefill_tokens = settings.prefill_tokens
        self.on_step = on_step  # on_step(slots, step): a test's fault injection
        self.cache_arg = cache_argument(model)
        self._compiled: dict[tuple, Callable] = {}  # by (exact slot count, live attention)
        self._engine: Optional[SlotState] = None
        self.slots_used = 0  # by the last run: an out-of-memory error halves it
        # steps run, slots x steps, prefill passes, OOM restarts, seconds in the step loop; seconds
        # building steps (compiling and capturing) and the compile store's entries found and missed
        self.stats = {"steps": 0, "slot_steps": 0, "prefills": 0, "restarts": 0, "decode_s": 0.0,
                      "compile_s": 0.0, "store_hits": 0, "store_misses": 0}
        self.mode = ""

    def compiled_logits(self, exact_slots: bool = False, live: bool = False) -> Callable:
        """The compiled forward (with live attention: codeeval/generation/hf/kernels/live_attention.py); for
        ``exact_slots``, one apart with thin products, compiled per slot count (Dynamo would
        otherwise take a graph for any count that it compiled before)."""
        key = (exact_slots, live)
        if key not in self._compiled:
            thin = self.thin_rows if exact_slots else 0
            forward = decode_step.live_logits(self.settings.query_block) if live else decode_step.logits
            self._compiled[key] = decode_step.compiled(forward, self.compile_mode, thin)
        return self._compiled[key]

    def _forwards(self, slots: int) -> tuple[list[tuple[str, Callable]], bool]:
        """The compiled forwards a step of ``slots`` slots tries, best first, and whether they are
        compiled for that exact count."""
        if not self.compile:
            return [], False
        exact = slots <= self.thin_rows
        live = bool(self.live_from) and slots >= self.live_from
        # Inductor's C++ FlexAttention fails to compile for a symbolic slot count (torch 2.13): on
        # a CPU (the tests) a live step is compiled per count; on a GPU where live_exact says
        exact = exact or (live and (self.device.type == "cpu" or self.settings.live_exact))
        forwards = [("compiled+live", self.compiled_logits(exact, True))] if live else []
        return forwards + [("compiled", self.compiled_logits(exact))], exact

    def decode(self, rows: list[Job], on_end: Optional[Callable[[int], None]] = None) -> list[tuple[str, int, str]]:
        """(text, n_tokens, finish_reason) per row, in the order given; ``on_end(j)`` as row j ends."""
        if self.cache_arg != "cache":
            raise Unsupported("the model's forward takes no `cache` argument")
        ends = RowEnds(self.tokenizer, rows, self.eos_ids, on_end)
        first_of: dict[tuple, int] = {}
        order = sorted(range(len(rows)), key=lambda j: (-(len(rows[j].ids) + rows[j].budget),
                                                        first_of.setdefault(tuple(rows[j].ids), j)))
        length = max(len(r.ids) + r.budget for r in rows)
        slots = max(1, min(self.slots_for(length), len(rows)))
        # a dimension of 1 would be compiled apart (specialised): compiled, one row gets 2 slots,
        # unless thin products compile such steps for their exact slot count anyway
        least = 2 if self.compile and not self.thin_rows else 1
        while True:
            todo = [j for j in order if ends.result[j] is None]
            try:
                self._run(rows, ends, todo, slots, least)
                return ends.result  # type: ignore[return-value]
            except Exception as exc:  # noqa: BLE001 - only running out of memory is handled
                if not decode_step.is_oom(exc) or self.slots_used == 1:
                    raise
            # out of the except clause: its traceback (and the tensors of its frames) is gone
            self.release()
            again = [j for j in todo if ends.result[j] is None]  # rows finished before the error are kept
            for j in again:
                ends.restart(j)
            slots = self.slots_used // 2
            least = min(least, slots)
            log.warning("out of memory decoding with %d slots: %d unfinished rows start again with %d",
                        self.slots_used, len(again), slots)
            self.stats["restarts"] += 1

    def release(self) -> None:
        self._engine = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # -- one run over the rows, with a fixed number of slots ------------------------------
    def _run(self, rows: list[Job], ends: RowEnds, todo: list[int], slots: int, least: int) -> None:
        waiting = deque(j for j in todo if ends.result[j] is None)
        if not waiting:
            return
        k = self.check_every
        slots = self.slots_used = max(least, min(slots, len(waiting)))
        length = max(len(rows[j].ids) + rows[j].budget for j in waiting)
        length = -(-length // BLOCK) * BLOCK  # fewer distinct shapes to capture; live attention's whole blocks
        store: dict[tuple, _Prompt] = {}
        self._prefill(rows, waiting, store, slots)
        eng = self._engine_for(next(iter(store.values())).cache, slots, length)
        held: list[list[_Occupant]] = [[] for _ in range(slots)]
        windows: deque = deque()
        step, began = 0, None

        def live(occ: _Occupant, at: int) -> bool:
            return occ.last >= at and ends.result[occ.row] is None

        while True:
            free = [s for s in range(slots) if not held[s] or not live(held[s][-1], step)]
            if free and waiting:
                self._refill(rows, free, waiting, store, eng, held, step)
            if not any(held[s] and live(held[s][-1], step) for s in range(slots)):
                if not windows:
                    if not waiting:
                        break
                    continue
                while windows:
                    self._read(windows.popleft(), held, ends, k)
                continue
            if began is None:
                began = self._synced()
            for _ in range(k):
                if self.on_step is not None:
                    self.on_step(slots, self.stats["steps"])
                eng.runner.run()
                self.stats["steps"] += 1
            self.stats["slot_steps"] += k * slots
            step += k
            windows.append((step - k, HostCopy(eng.hist[(step - k) % eng.ring:][:k])))
            while len(windows) > 1:
                self._read(windows.popleft(), held, ends, k)
        for occs in held:  # first tokens of rows that ended with them
            for occ in occs:
                _feed_first(occ, ends)
        if began is not None:
            self.stats["decode_s"] += self._synced() - began

    def _engine_for(self, like, slots: int, length: int) -> SlotState:
        if not slot_cache.supported(like):
            raise Unsupported("the model's KV cache is not plain full attention")
        key = (slots, length, like.layers[0].keys.dtype, self.args)
        if self._engine is None or self._engine.key != key:
            self._engine = None  # the old cache goes before the new one is allocated
            forwards, exact = self._forwards(slots)
            entry = self._store_key(forwards, exact, slots)
            if entry is not None:
                self.stats["store_hits" if self.store.load(entry) else "store_misses"] += 1
            began = time.perf_counter()
            self._engine = SlotState(self.model, self.args, like, slots, length, self.check_every, self.graph,
                                     forwards, exact_slots=exact)
            self.stats["compile_s"] += time.perf_counter() - began
            if entry is not None:
                self.store.save(entry)  # after a miss only
            self.mode = self._engine.runner.mode
            if len(forwards) > 1 and "live" not in self.mode:
                self.live_from = 0  # the live step failed (the log says why): not compiled again per shape
        else:
            self._engine.reset()
        return self._engine

    def _store_key(self, forwards: list, exact: bool, slots: int) -> Optional[str]:
        """The compile store's key of a step built with ``forwards`` (None: nothing compiled, or no store)."""
        if not forwards or self.store is None:
            return None
        return compile_store.entry_key(self.model, self.device, forwards=[name for name, _ in forwards],
                                       slots=slots if exact else "any", mode=self.compile_mode, thin=self.thin_rows,
                                       fuse=self.fuse, graph=self.graph and self.device.type == "cuda",
                                       live=self.live_from, query=self.settings.query_block)

    def _prefill(self, rows: list[Job], waiting: deque, store: dict, slots: int) -> None:
        """Prefill the distinct prompts of the next waiting rows that have none, up to
        ``prefill_tokens`` padded tokens (at least one prompt)."""
        group: list[tuple] = []
        counts: dict[tuple, int] = {}
        width = 0
        for j in waiting:  # the rows of a prompt are next to each other
            p = tuple(rows[j].ids)
            counts[p] = counts.get(p, 0) + 1
            if p in store or counts[p] > 1:
                continue
            if group and ((len(group) + 1) * max(width, len(p)) > self.prefill_tokens or len(group) >= slots):
                break
            group.append(p)
            width = max(width, len(p))
        if not group:
            return
        cache, logits, mask, _ = prefill(self.model, self.cache_arg, group, self.pad_id, self.device)
        self.stats["prefills"] += 1
        width = mask.shape[1]
        for i, p in enumerate(group):
            store[p] = _Prompt(cache, i, width - len(p), logits[i], counts[p])

    def _refill(self, rows, free: list[int], waiting: deque, store: dict, eng: SlotState, held, step: int) -> None:
        taken = []
        for s in free:
            while waiting:
                j = waiting.popleft()
                if tuple(rows[j].ids) not in store:
                    waiting.appendleft(j)
                    self._prefill(rows, waiting, store, len(held))
                    j = waiting.popleft()
                taken.append((s, j))
                if rows[j].budget > 1:
                    break  # a row of budget 1 ends with its first token: the slot takes another
        by_prompt: dict[tuple, list[int]] = {}
        for s, j in taken:
            by_prompt.setdefault(tuple(rows[j].ids), []).append(s)
        for p, ss in by_prompt.items():
            entry = store[p]
            eng.cache.load(self._dev(ss), entry.cache, entry.row, entry.start, len(p))
            entry.rows_left -= len(ss)
        slots_t = self._dev([s for s, _ in taken])
        seeds = [sample_seed(self.args.seed, *rows[j].seed_key) for _, j in taken] if self.args.do_sample else []
        logits = torch.stack([store[tuple(rows[j].ids)].logits for _, j in taken])
        draws = uniforms(self._dev(seeds), torch.zeros_like(slots_t)) if seeds else None
        first = choose(logits, self.args, draws)
        eng.tok.index_copy_(0, slots_t, first)
        eng.cache.columns.index_copy_(0, slots_t, self._dev([len(rows[j].ids) for _, j in taken]))
        eng.count.index_fill_(0, slots_t, 1)
        if seeds:
            eng.seeds.index_copy_(0, slots_t, self._dev(seeds))
        copy = HostCopy(first)
        for i, (s, j) in enumerate(taken):
            held[s].append(_Occupant(j, step, step + rows[j].budget - 2, (copy, i)))
        for p in [p for p, e in store.items() if e.rows_left <= 0]:
            del store[p]

    def _read(self, window, held, ends: RowEnds, k: int) -> None:
        """Feed a window of k steps to the rows that own them; drop tokens past a row's end."""
        t0, copy = window
        tokens = copy.values()
        for s, occs in enumerate(held):
            owner = None
            for occ in occs:
                if occ.start <= t0:
                    _feed_first(occ, ends)
                    owner = occ
            if owner is None:
                continue
            if ends.result[owner.row] is None:
                ends.take(owner.row, [tokens[i][s] for i in range(min(k, owner.last - t0 + 1))])
            occs[:] = [occ for occ in occs if occ.start >= owner.start]

    def _synced(self) -> float:
        """The time once the device has done what it was given (twice a run: timing only)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def _dev(self, values: list[int]) -> torch.Tensor:
        """A host list on the device without waiting for the GPU (pinned, non-blocking)."""
        t = torch.tensor(values, dtype=torch.long)
        if self.device.type != "cuda":
            return t
        return t.pin_memory().to(self.device, non_blocking=True)


def _feed_first(occ: _Occupant, ends: RowEnds) -> None:
    """A row's first token (drawn from its prompt's prefill) before any of its step tokens."""
    if not occ.fed_first:
        occ.fed_first = True
        copy, i = occ.first
        ends.take(occ.row, [copy.values()[i]])
