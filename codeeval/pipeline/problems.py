"""problems.parquet: the planned problems of a task and each one's sample count."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

from codeeval.benchmarks.spec import Problem
from codeeval.core.artifacts import read_rows


def problems_rows(problems: Iterable[Problem], counts: Mapping[str, int]) -> list[dict]:
    return [
        {"task_id": p.task_id, "index": p.index, "prompt": p.prompt,
         "record": json.dumps(p.record, ensure_ascii=False), "n_samples": counts[p.task_id]}
        for p in problems
    ]


def read_problems(path: Path) -> tuple[list[Problem], dict[str, int]]:
    rows = read_rows(path)
    problems = [Problem(r["task_id"], r["index"], r["prompt"], json.loads(r["record"])) for r in rows]
    return problems, {r["task_id"]: r["n_samples"] for r in rows}
