"""What a benchmark is: plain data plus pure functions (bigcode's Task, without state).

A TaskSpec is frozen; variants (e.g. MBPP honouring test_setup_code) are separate
specs built by a factory, never a mutated shared object or a global mode flag.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional


@dataclass(frozen=True)
class Problem:
    """One benchmark problem. `record` is the upstream record, untouched."""

    task_id: str
    index: int  # position in the dataset (bigcode's `idx`)
    prompt: str
    record: Mapping[str, Any]


@dataclass(frozen=True)
class LoadOptions:
    data_dir: Optional[Path] = None  # local copies in upstream format; None = HF datasets


@dataclass(frozen=True)
class TaskSpec:
    name: str
    family: str
    load: Callable[[LoadOptions], list[Problem]]
    stop_words: tuple[str, ...]
    # (problem, continuation, extra stop strings such as the eos text) -> candidate program
    postprocess: Callable[[Problem, str, tuple[str, ...]], str]
    # (problem, candidate) -> the full program that is executed (candidate + tests)
    program: Callable[[Problem, str], str]
    # problem -> a known-correct candidate (the `reference` backend's oracle)
    reference_solution: Callable[[Problem], str]
    timeout_s: float = 3.0
    default_ks: tuple[int, ...] = (1, 10, 100)
    guard: bool = True  # run programs under bigcode's reliability_guard
    hf_dataset: str = ""  # the HF datasets id the reference harness loads
    description: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
