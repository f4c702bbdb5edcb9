"""Decode one batch of jobs to the end, each row stopping on its own.

* One prefill per distinct prompt: the n sampled rows of a prompt share it, and its KV cache
  rows are copied (``batch_select_indices`` with repeated indices) rather than recomputed.
* Prompt lookup (codeeval/generation/hf/lookup.py), greedy and seeded sampling alike: a row's draft
  and its last token go through one forward pass; the row keeps each draft token that equals the
  token it would have chosen at that step anyway (argmax, or the draw with that step's uniform)
  and the chosen token after them. So the tokens are those of one-token-a-step decoding. Rejected
  positions stay in the cache under a zero mask until ``compact`` squeezes them out. A row's draft
  grows while drafts are accepted and shrinks when they are not; a forward pass scores at most
  ``step_tokens`` positions (beyond one per row), since a CPU pays for every position.
* Stopping is checked token by token (codeeval/generation/prompts/stopping.py): eos, then a stop string
  in the newest text, then the budget; tokens accepted after a row's end are dropped.
"""
from __future__ import annotations

import torch

from codeeval.generation.hf import lookup
from codeeval.generation.hf.prefill import cache_argument, forward, prefill
from codeeval.generation.hf.sampling import choose
from codeeval.generation.prompts.requests import Job
from codeeval.generation.prompts.seeds import sample_seed, uniform
from codeeval.generation.prompts.stopping import RowEnds


class BatchDecoder:
    def __init__(self, model, tokenizer, args, device, eos_ids: list[int], pad_id: int,
                 draft_tokens: int = 10, step_tokens: int = 48):
        self.model, self.tokenizer, self.args, self.device = model, tokenizer, args, device
        self.eos_ids = eos_ids
        self.pad_id = pad_id
        self.draft_tokens, self.step_tokens = draft_tokens, step_tokens
        self.stats = {"forwards": 0, "drafted": 0, "accepted": 0}  # decode steps and their drafts

    def decode(self, batch: list[Job]) -> list[tuple[str, int, str]]:
        """(text, n_tokens, finish_reason) per row, in batch order."""
        dev, n = self.device, len(batch)
        slot: dict[tuple, int] = {}
        owner = [slot.setdefault(tuple(r.ids), len(slot)) for r in batch]
        cache_arg = cache_argument(self.model)
        cache, logits, mask, next_pos = prefill(self.model, cache_arg, list(slot), self.pad_id, dev)
        if len(slot) < n:  # rows of one prompt share its prefill
            idx = torch.tensor(owner, device=dev)
            cache.batch_select_indices(idx)
            logits, mask, next_pos = logits[idx], mask[idx], next_pos[idx]

        self.seeds = [sample_seed(self.args.seed, *r.seed_key) for r in batch] if self.args.do_sample else None
        done = RowEnds(self.tokenizer, batch, self.eos_ids)
        self.tokens = done.tokens
        first = choose(logits, self.args, self._uniforms([(j, 0) for j in range(n)])).tolist()
        alive = list(range(n))  # the rows of the cache, in order
        active = [j for j in alive if not done.take(j, [first[j]])]
        draft_len = [min(4, self.draft_tokens)] * n
        while active:
            if len(active) < len(alive):  # finished rows leave the batch
                keep = set(active)
                idx = torch.tensor([k for k, j in enumerate(alive) if j in keep], device=dev)
                cache.batch_select_indices(idx)
                mask, next_pos = mask[idx], next_pos[idx]
                alive = active
            room = max(0, self.step_tokens // len(active) - 1) if self.draft_tokens else 0
            drafts = [lookup.propose(list(batch[j].ids) + self.tokens[j],
                                     min(draft_len[j], room, batch[j].budget - len(self.tokens[j]) - 1))
                      for j in active]
            w = 1 + max(len(d) for d in drafts)
            step_ids = torch.full((len(active), w), self.pad_id, dtype=torch.long)
            step_mask = torch.zeros((len(active), w), dtype=torch.long)
            for k, (j, d) in enumerate(zip(active, drafts)):
                step_ids[k, :1 + len(d)] = torch.tensor([self.tokens[j][-1]] + d, dtype=torch.long)
                step_mask[k, :1 + len(d)] = 1
            mask = torch.cat([mask, step_mask.to(dev)], dim=1)
            # padding reuses its row's last position (masked anyway; never past the model's context)
            lens = torch.tensor([len(d) for d in drafts], device=dev)
            offsets = torch.minimum(torch.arange(w, device=dev)[None, :], lens[:, None])
            step_logits, cache = forward(self.model, cache_arg, step_ids.to(dev), mask, next_pos + offsets, cache)
            self.stats["forwards"] += 1
            rows = [(k, i) for k, d in enumerate(drafts) for i in range(len(d) + 1)]
            picked = choose(step_logits[[k for k, _ in rows], [i for _, i in rows]], self.args,
                            self._uniforms([(active[k], len(self.tokens[active[k]]) + i) for k, i in rows])).tolist()
            still, at = [], 0
            for k, (j, d) in enumerate(zip(active, drafts)):
                chosen, at = picked[at:at + len(d) + 1], at + len(d) + 1
                a = lookup.accepted(d, chosen)
                self.stats["drafted"] += len(d)
                self.stats["accepted"] += a
                mask[k, mask.shape[1] - w + 1 + a:] = 0  # rejected drafts and padding
                next_pos[k] += 1 + a
                if d:
                    draft_len[j] = min(self.draft_tokens, draft_len[j] + 2) if a == len(d) else max(1, a + 1)
                if not done.take(j, chosen[:a + 1]):
                    still.append(j)
            active = still
            if hasattr(cache, "layers") and mask.shape[1] > 64 and int(mask.sum(dim=1).max()) < 0.75 * mask.shape[1]:
                mask = lookup.compact(cache, mask)
        return done.result  # type: ignore[return-value]

    def _uniforms(self, keys):
        return [uniform(self.seeds[j], step) for j, step in keys] if self.seeds else None
