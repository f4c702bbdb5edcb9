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
    # the OCI runtime its containers run under (runsc: gVisor); "" = the worker's CODEEVAL_SANDBOX_RUNTIME,
    # else the engine's default (executors/docker/runtimes.py)
    container_runtime: str = ""


def open_sandbox(spec: SandboxSpec) -> Sandbox:
    module, _, cls = SANDBOXES[spec.name].partition(":")
    sandbox_cls = getattr(importlib.import_module(f"codeeval.executors.{module}"), cls)
    from codeeval.executors.docker.images import PYTHON_RUNTIMES

    if spec.name != "docker":
        if spec.runtime not in PYTHON_RUNTIMES:
            from codeeval.core.errors import UsageError

            raise UsageError(f"runtime {spec.runtime!r} runs only in the Docker sandbox (--executor docker)")
        return sandbox_cls(n_workers=spec.n_workers, limits=spec.limits)
    image = "python" if spec.runtime in PYTHON_RUNTIMES else spec.runtime  # the repo-level tasks: the Python image
    return sandbox_cls(n_workers=spec.n_workers, limits=spec.limits, runtime=image,
                       container_runtime=spec.container_runtime)
