"""The program text of a family's sandbox harness (codeeval/benchmarks/<family>/harness.py), the one
way a family reads it. A harness is sent as one program, so its `from quiet_io import ...` line is
replaced by that module's text (codeeval/benchmarks/quiet_io.py): the file reads as ordinary Python
beside its prelude, and the sandbox needs no extra module."""
from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
_PRELUDE = re.compile(r"^from (quiet_io) import (\w+)(?: as (\w+))?(?:\s*#.*)?$", re.M)


def harness_text(family: str) -> str:
    text = (HERE / family / "harness.py").read_text(encoding="utf-8")

    def inline(match: re.Match) -> str:
        module = (HERE / f"{match[1]}.py").read_text(encoding="utf-8")
        alias = f"\n{match[3]} = {match[2]}\n" if match[3] else ""
        return module + alias

    return _PRELUDE.sub(inline, text, count=1)
