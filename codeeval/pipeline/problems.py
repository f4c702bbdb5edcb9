"""problems.parquet: the planned problems of a task and each one's sample count.

Its fingerprint (what the shards' cache keys hold) leaves out the `site` column: the host paths
of repo-level problems, so that a moved checkout or another host reuses the same shards.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Iterable, Mapping, Optional

from codeeval.benchmarks.spec import Problem, RepoContext, RepoSite
from codeeval.core.artifacts import read_rows
from codeeval.core.fingerprint import digest

HOST_COLUMNS = ("site",)


def _json(value) -> Optional[str]:
    return None if value is None else json.dumps(dataclasses.asdict(value), ensure_ascii=False, sort_keys=True)


def problems_rows(problems: Iterable[Problem], counts: Mapping[str, int]) -> list[dict]:
    return [
        {"task_id": p.task_id, "index": p.index, "prompt": p.prompt,
         "record": json.dumps(p.record, ensure_ascii=False), "n_samples": counts[p.task_id],
         "repo": _json(p.repo), "site": _json(p.site)}
        for p in problems
    ]


def problem_of(row: Mapping) -> Problem:
    repo, site = row.get("repo"), row.get("site")
    return Problem(row["task_id"], row["index"], row["prompt"], json.loads(row["record"]),
                   repo=RepoContext(**json.loads(repo)) if repo else None,
                   site=RepoSite(**json.loads(site)) if site else None)


def read_problems(path: Path) -> tuple[list[Problem], dict[str, int]]:
    rows = read_rows(path)
    return [problem_of(r) for r in rows], {r["task_id"]: r["n_samples"] for r in rows}


def portable(row: Mapping) -> dict:
    """A problems.parquet row without its host columns."""
    return {k: v for k, v in row.items() if k not in HOST_COLUMNS}


def fingerprint(path: Path) -> str:
    """The problems' identity: every column but the host ones."""
    return digest([portable(r) for r in read_rows(path)])
