"""Task names -> TaskSpec factories.

A family is one module with `TASK_NAMES` (every name it answers, `multiple-<lang>` for each
language of the data included) and `make(name) -> TaskSpec`, listed once in FAMILIES. A family of
more than one file is a folder: that module is its `__init__`, beside `data` (where its records
come from) and `harness` (its sandbox program, read by harness_text) where it has them.
"""
from __future__ import annotations

from typing import Callable

from codeeval.benchmarks import (
    apps,
    classification,
    codesembench,
    ds1000,
    evalplus,
    humaneval,
    mbpp,
    multiple,
    pal,
    ruhumaneval,
)
from codeeval.benchmarks.codexglue import code_to_text, text_to_code
from codeeval.benchmarks.repo import family as repo_level
from codeeval.benchmarks.spec import TaskSpec
from codeeval.core.errors import UsageError, unknown

Factory = Callable[[str], TaskSpec]

FAMILIES = (humaneval, mbpp, evalplus, pal, text_to_code, code_to_text, ruhumaneval, codesembench, apps, ds1000,
            multiple, repo_level, classification)

TASKS: dict[str, Factory] = {name: family.make for family in FAMILIES for name in family.TASK_NAMES}

def get_task(name: str) -> TaskSpec:
    """A fresh TaskSpec for `name`; raises UsageError naming the known tasks."""
    if name in TASKS:
        return TASKS[name](name)
    raise UsageError(unknown("task", name, TASKS, f"`codeeval tasks` lists all {len(TASKS)}"))


def task_names() -> list[str]:
    return sorted(TASKS)
