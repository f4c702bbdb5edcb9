"""Which OCI runtime runs the sandbox's containers: the engine's default (runc), or another the
engine has registered, such as gVisor's runsc, an application kernel between model code and the
host's kernel (docs/security.md, "gVisor").

The run may name one (`--sandbox-runtime`, RunConfig.sandbox_runtime); a worker names its own
default in CODEEVAL_SANDBOX_RUNTIME, and may require one (CODEEVAL_WORKER_REQUIRE_RUNTIME,
pipeline/policy.py). What a name resolves to is decided where the containers start, on the worker.
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

RUNTIME_ENV = "CODEEVAL_SANDBOX_RUNTIME"
REQUIRE_ENV = "CODEEVAL_WORKER_REQUIRE_RUNTIME"
HOST = "host"  # what a program of the local executor runs under: no container runtime at all
# Runtimes with a kernel of their own per container (gVisor's Sentry). There, RLIMIT_NPROC counts the
# container's processes alone, so it is the program's process limit, set to what runc's --pids-limit
# gives it; and the container's --pids-limit, which the host's cgroup applies to the runtime's own
# threads as well (about 40 for one Python process and 6 more per child under the ptrace platform; a
# fork bomb held at 80 processes needed more than 640 host tasks, and up to about 2000 at times), is
# a backstop only: HOST_TASKS_PER_PROCESS per process, and HOST_TASKS_BASE for the Sentry.
OWN_KERNEL = frozenset({"runsc"})
HOST_TASKS_PER_PROCESS = 24
HOST_TASKS_BASE = 2048


def chosen(requested: str = "", env: Optional[Mapping[str, str]] = None) -> str:
    """The runtime a shard asks for: the run's own choice, else this worker's default; "" = the
    engine's default runtime."""
    env = os.environ if env is None else env
    return (requested or env.get(RUNTIME_ENV, "")).strip()


def effective(name: str, executor: str = "docker") -> str:
    """A chosen runtime's name as a policy compares it: "runc" for the engine's default (Docker's,
    unless a host changed it; `engine_runtime` reads the real one), HOST for a sandbox that is not
    Docker."""
    return (name or "runc") if executor == "docker" else HOST


def required(env: Optional[Mapping[str, str]] = None) -> str:
    """The runtime this worker requires of every shard (REQUIRE_ENV), "" for none."""
    return (os.environ if env is None else env).get(REQUIRE_ENV, "").strip()


def refusal(actual: str, need: str) -> str:
    """The phrase of a worker that requires the runtime `need` for a shard that would run under
    `actual` (`effective`'s name); "" when it may run."""
    if not need or actual == need:
        return ""
    return (f"the sandbox would run under {actual}, and this worker requires {need} ({REQUIRE_ENV}): "
            f"--sandbox-runtime {need}, or {RUNTIME_ENV}={need} on the worker")


def pids_limit(processes: int, runtime: str) -> int:
    """A container's --pids-limit for `processes` of its own: under a runtime with its own kernel,
    that kernel's host threads on top (OWN_KERNEL)."""
    if runtime in OWN_KERNEL:
        return processes * HOST_TASKS_PER_PROCESS + HOST_TASKS_BASE
    return processes


def missing(name: str) -> str:
    """The one line for an engine that lacks the runtime."""
    setup = f"make engine RUNTIME={name}" if name == "runsc" else "register it in the engine's daemon.json"
    return f"{name} is not a runtime of this Docker engine: {setup}"


def engine_runtime(client, requested: str) -> str:
    """The runtime the engine will run containers under (its DefaultRuntime for ""); ValueError
    with `missing`'s line when the engine has no such runtime."""
    info = client.info()
    if not requested:
        return str(info.get("DefaultRuntime") or "runc")
    if requested not in (info.get("Runtimes") or {}):
        raise ValueError(missing(requested))
    return requested
