"""When a row ends, decided on the host token by token: eos, then a stop string in the newest
text, then the budget. Both decoders feed their rows' new tokens through :class:`RowEnds`, so
they end rows in the same place whatever the number of tokens a call brings (one step's, a
verified draft, or k steps read back from a GPU at once); tokens after a row's end are dropped.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from codeeval.generation.prompts import chat
from codeeval.generation.prompts.requests import Job


def ends(tokenizer, row: Job, tail: str, tokens: list[int]) -> bool:
    """A stop string in the newest text ends a row; a free chat answer ends once its first
    code block closes (the whole answer is decoded only when a fence is in sight)."""
    if not any(s in tail for s in row.watch):
        return False
    return row.mode != "answer" or chat.answer_complete(tokenizer.decode(tokens, skip_special_tokens=False))


class RowEnds:
    """The tokens and the result of each row of ``rows``: (text, n_tokens, finish_reason)."""

    def __init__(self, tokenizer, rows: Sequence[Job], eos_ids, on_end: Optional[Callable[[int], None]] = None):
        self.tokenizer, self.rows, self.eos, self.on_end = tokenizer, rows, set(eos_ids), on_end
        self.tokens: list[list[int]] = [[] for _ in rows]
        # a stop string of L characters spans at most 4L byte-level tokens: decoding that window
        # of the newest tokens finds every stop that the newest token completes
        self.window = [4 * max((len(s) for s in r.watch), default=0) + 2 for r in rows]
        self.result: list[Optional[tuple[str, int, str]]] = [None] * len(rows)

    def take(self, j: int, new: Sequence[int]) -> bool:
        """Append row j's new tokens one at a time; True (and its result recorded) once it ends.
        Tokens after the end are dropped."""
        row, tokens = self.rows[j], self.tokens[j]
        # a stop string completed by several new tokens is in their joint text: test that once
        watch = bool(row.watch) and (len(new) == 1 or any(s in self._tail(j, tokens + list(new), len(new))
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
                if self.on_end is not None:
                    self.on_end(j)
                return True
        return False

    def restart(self, j: int) -> None:
        """Forget row j's tokens: it is decoded again from its prompt."""
        self.tokens[j] = []
        self.result[j] = None

    def _tail(self, j: int, tokens: list[int], extra: int) -> str:
        return self.tokenizer.decode(tokens[-(self.window[j] + extra - 1):], skip_special_tokens=False)
