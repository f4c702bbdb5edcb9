"""Pre-flight: everything bad input can break, checked before any flow run is created.

The CLI runs it while its temporary Prefect server boots. Each failure is a UsageError: one
line on stderr and exit code 2, within seconds (the hub is asked once, with a short timeout).
Order (cli._prepare): flags and task names, the output paths, the model, the Docker engine, then
the data (pipeline/plan.py plan_run loads every task's problems and validates k and any
generations file; the flow's load stage reuses that plan).
"""
from __future__ import annotations

import socket
import tempfile
import urllib.parse
from pathlib import Path

from codeeval.core import storage
from codeeval.core.errors import UsageError
from codeeval.executors.docker import runtimes
from codeeval.generation import LOADS_WEIGHTS
from codeeval.pipeline.config import RunConfig


def check_writable(path: Path, what: str) -> None:
    """`path` (a directory) exists or can be made, and a file can be written in it. Directories
    made for the check are removed again: input refused later leaves nothing behind (the run
    makes them when it writes its first file)."""
    made = [p for p in (path, *path.parents) if not p.exists()]  # deepest first
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".codeeval-write-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write to the {what} {path}: {exc.strerror or exc}") from None
    finally:
        for directory in made:
            try:
                directory.rmdir()
            except OSError:  # not made by us after all, or something was written there meanwhile
                break


def check_outputs(config: RunConfig) -> None:
    check_writable(config.run_dir, "output dir")
    if config.metric_output_path:
        check_output(config.metric_output_path, "--metric_output_path")
    if config.save_generations or config.generation_only:
        check_output(config.save_generations_path, "--save_generations_path")


def check_output(path: str, flag: str) -> None:
    """A file the user named: a URL whose protocol this host can write, else a writable directory."""
    if "://" not in path:
        check_writable(Path(path).parent, f"directory of {flag}")
    elif (problem := storage.url_problem(path)) is not None:
        raise UsageError(f"cannot write {flag} {path}: {problem}")


def check_model(config: RunConfig) -> None:
    kind = config.backend_kind
    if kind in LOADS_WEIGHTS:
        from codeeval.generation.models.model_source import resolve

        resolve(config.model, config.generation.revision, check_hub=True)
        check_classifier(config)
    elif kind == "openai":
        check_endpoint(config.backend_options.get("base_url"))


def check_classifier(config: RunConfig) -> None:
    """A run with a classification task fine-tunes the model as a sequence classifier: transformers
    must have one for its architecture (read from its config, in a second)."""
    from codeeval.benchmarks.registry import get_task

    classifying = [name for name in config.tasks if get_task(name).classification is not None]
    if not classifying:
        return
    from codeeval.pipeline.plan import backend_spec
    from codeeval.pipeline.train import model_ref
    from codeeval.training.classifier import unsupported

    if (why := unsupported(model_ref(backend_spec(config)))) is not None:
        raise UsageError(f"{classifying[0]} fine-tunes {config.model} as a sequence classifier, which cannot be "
                         f"built: {why}")


def check_endpoint(base_url: str | None, timeout_s: float = 3.0) -> None:
    """The OpenAI-compatible server accepts a connection (the request itself may still fail)."""
    import os

    url = urllib.parse.urlsplit(base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1")
    if url.scheme not in ("http", "https") or not url.hostname:
        raise UsageError(f"--base_url must be an http(s) URL, got {base_url!r}")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(f"the openai backend's server {url.scheme}://{url.netloc} does not answer "
                         f"({exc.strerror or type(exc).__name__}): check --base_url / OPENAI_BASE_URL") from None


def check_sandbox(config: RunConfig) -> None:
    from codeeval.benchmarks.registry import get_task

    if config.generation_only or all(get_task(name).classification is not None for name in config.tasks):
        return  # nothing runs in the sandbox (a classification task trains and predicts)
    from codeeval.executors.docker import images

    if line := runtimes.refusal(runtimes.effective(runtimes.chosen(config.sandbox_runtime), config.executor),
                                runtimes.required()):
        raise UsageError(f"this host refuses the run: {line}")
    kinds = {spec.execution.runtime for spec in map(get_task, config.tasks) if spec.executes} - images.PYTHON_RUNTIMES
    if config.executor != "docker":
        if kinds:
            raise UsageError(f"{', '.join(sorted(kinds))} run only in the Docker sandbox: use --executor docker")
        return
    from codeeval.executors.docker import engine, starts
    from codeeval.executors.docker.sandbox import SandboxUnavailable, check_available, default_image

    try:
        starts.cap()
        check_available(default_image())
        if wanted := runtimes.chosen(config.sandbox_runtime):
            client = engine.connect(timeout=engine.PING_TIMEOUT_S)
            try:
                runtimes.engine_runtime(client, wanted)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
            finally:
                client.close()
        for runtime in sorted(kinds):  # e.g. ds1000, multiple-cpp: its image (or why none exists: Julia)
            check_available(images.runtime_image(runtime), missing=f"run `{images.build_command(runtime)}` to build it")
    except (SandboxUnavailable, images.RuntimeUnavailable, ValueError) as exc:
        raise UsageError(str(exc)) from None
