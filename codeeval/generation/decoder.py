"""Decode one batch of jobs to the end, each row stopping on its own.

* One prefill per distinct prompt: the n sampled rows of a prompt share it, and its KV cache
  rows are copied (``batch_select_indices`` with repeated indices) rather than recomputed.
* Prompt lookup (codeeval/generation/lookup.py), greedy and seeded sampling alike: a row's draft
  and its last token go through one forward pass; the row keeps each draft token that equals the
  token it would have chosen at that step anyway (argmax, or the draw with that step's uniform)
  and the chosen token after them. So the tokens are those of one-token-a-step decoding. Rejected
  positions stay in the cache under a zero mask until ``compact`` squeezes them out. A row's draft
  grows while drafts are accepted and shrinks when they are not; a forward pass scores at most
  ``step_tokens`` positions (beyond one per row), since a CPU pays for every position.
* Stopping is checked token by token as before: eos, then a stop string in the newest text,
  then the budget; tokens accepted after a row's end are dropped.
"""
from __future__ import annotations

from typing import Optional

import torch

from codeeval.generation import chat, lookup
from codeeval.generation.requests import Job
from codeeval.generation.sampling import choose
from codeeval.generation.seeds import sample_seed, uniform


def ends(tokenizer, row: Job, tail: str, tokens: list[int]) -> bool:
    """A stop string in the newest text ends a row; a free chat answer ends once its first
    code block closes (the whole answer is decoded only when a fence is in sight)."""
    if not any(s in tail for s in row.watch):
        return False
    return row.mode != "answer" or chat.answer_complete(tokenizer.decode(tokens, skip_special_tokens=False))


class BatchDecoder:
    def __init__(self, model, tokenizer, args, device, eos_ids: list[int], pad_id: int,
                 draft_tokens: int = 10, step_tokens: int = 48):
        self.model, self.tokenizer, self.args, self.device = model, tokenizer, args, device
        self.eos = set(eos_ids)
        self.pad_id = pad_id
        self.draft_tokens, self.step_tokens = draft_tokens, step_tokens
        self.stats = {"forwards": 0, "drafted": 0, "accepted": 0}  # decode steps and their drafts

    def decode(self, batch: list[Job]) -> list[tuple[str, int, str]]:
        """(text, n_tokens, finish_reason) per row, in batch order."""
        dev, n = self.device, len(batch)
        slot: dict[tuple, int] = {}
        owner = [slot.setdefault(tuple(r.ids), len(slot)) for r in batch]
        prompts = list(slot)
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for j, p in enumerate(prompts):
            ids[j, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[j, width - len(p):] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self._forward(ids, mask, positions, None, prefill=True)
        cache, logits = out.past_key_values, out.logits[:, -1, :]
        next_pos = positions[:, -1:] + 1
        if len(prompts) < n:  # rows of one prompt share its prefill
            idx = torch.tensor(owner, device=dev)
            cache.batch_select_indices(idx)
            logits, mask, next_pos = logits[idx], mask[idx], next_pos[idx]

        self.batch = batch
        self.seeds = [sample_seed(self.args.seed, *r.seed_key) for r in batch] if self.args.do_sample else None
        self.tokens: list[list[int]] = [[] for _ in batch]
        self.window = [4 * max((len(s) for s in r.watch), default=0) + 2 for r in batch]
        self.result: list[Optional[tuple[str, int, str]]] = [None] * n
        first = choose(logits, self.args, self._uniforms([(j, 0) for j in range(n)])).tolist()
        alive = list(range(n))  # the rows of the cache, in order
        active = [j for j in alive if not self._take(j, [first[j]])]
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
            out = self._forward(step_ids.to(dev), mask, next_pos + offsets, cache)
            cache = out.past_key_values
            self.stats["forwards"] += 1
            rows = [(k, i) for k, d in enumerate(drafts) for i in range(len(d) + 1)]
            picked = choose(out.logits[[k for k, _ in rows], [i for _, i in rows]], self.args,
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
                if not self._take(j, chosen[:a + 1]):
                    still.append(j)
            active = still
            if hasattr(cache, "layers") and mask.shape[1] > 64 and int(mask.sum(dim=1).max()) < 0.75 * mask.shape[1]:
                mask = lookup.compact(cache, mask)
        return self.result  # type: ignore[return-value]

    def _uniforms(self, keys):
        return [uniform(self.seeds[j], step) for j, step in keys] if self.seeds else None

    def _take(self, j: int, new: list[int]) -> bool:
        """Append row j's new tokens one at a time; True (and its result recorded) once it ends."""
        row, tokens = self.batch[j], self.tokens[j]
        # a stop string completed by several new tokens is in their joint text: test that once
        watch = bool(row.watch) and (len(new) == 1 or any(s in self._tail(j, tokens + new, len(new))
                                                          for s in row.watch))
        for t in new:
            tokens.append(t)
            reason = None
            if t in self.eos:
                reason = "eos"
            elif watch and ends(self.tokenizer, row, self._tail(j, tokens, 1), tokens):
                reason = "stop"
            elif len(tokens) >= row.budget:
                reason = "length"
            if reason:
                self.result[j] = (self.tokenizer.decode(tokens, skip_special_tokens=False), len(tokens), reason)
                return True
        return False

    def _tail(self, j: int, tokens: list[int], extra: int) -> str:
        # a stop string of L characters spans at most 4L byte-level tokens: decoding that
        # window of the newest tokens finds every stop that the newest token completes
        return self.tokenizer.decode(tokens[-(self.window[j] + extra - 1):], skip_special_tokens=False)

    def _forward(self, input_ids, mask, positions, cache, prefill=False):
        kwargs = dict(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                      past_key_values=cache, use_cache=True)
        if prefill:
            try:
                return self.model(**kwargs, logits_to_keep=1)
            except TypeError:  # older or remote-code models
                pass
        return self.model(**kwargs)
