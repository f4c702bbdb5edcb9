"""Sandboxes, imported only when chosen."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from codeeval.executors.base import Limits, Outcome, Program, Sandbox  # noqa: F401

# name -> "module:Class" under codeeval.executors
SANDBOXES = {
    "local": "local:LocalSandbox",
    "docker": "docker.sandbox:DockerSandbox",
}


@dataclass(frozen=True)
class SandboxSpec:
    name: str = "docker"
    n_workers: int = 0  # 0 = the machine's core count
    limits: Limits = Limits()
    runtime: str = "python"  # Execution.runtime: which image the Docker sandbox runs (codeeval/executors/docker/images.py)


def open_sandbox(spec: SandboxSpec) -> Sandbox:
    module, _, cls = SANDBOXES[spec.name].partition(":")
    sandbox_cls = getattr(importlib.import_module(f"codeeval.executors.{module}"), cls)
    from codeeval.executors.docker.images import PYTHON_RUNTIMES

    if spec.runtime in PYTHON_RUNTIMES:
        return sandbox_cls(n_workers=spec.n_workers, limits=spec.limits)
    if spec.name != "docker":
        from codeeval.core.errors import UsageError

        raise UsageError(f"runtime {spec.runtime!r} runs only in the Docker sandbox (--executor docker)")
    return sandbox_cls(n_workers=spec.n_workers, limits=spec.limits, runtime=spec.runtime)
