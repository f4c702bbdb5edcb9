"""A deployment run is held against the worker's policy (codeeval/pipeline/policy.py) before it
does anything: a refused run ends with one line in its log (so in `--watch`) and as its summary
artifact, and starts no model, no container and writes no file. A flow called by `codeeval run`
(no deployment) is the user's own: it keeps every option."""
from __future__ import annotations

import socket

from prefect.artifacts import create_markdown_artifact

from codeeval.core.errors import RunFailed
from codeeval.pipeline import failures
from codeeval.pipeline.policy import Request, WorkerPolicy, refusal_line


class RunRefused(RunFailed):
    """The worker's policy refused what the run asked for (one line: RunFailed is explained)."""


def from_deployment() -> bool:
    """Whether this flow run came from a deployment, or is a subflow of one (`nightly-leaderboard`'s
    evaluate runs): anyone who reaches the server may have set its parameters. A top-level run
    says so itself; only a subflow asks for its deployment's (`prefect.runtime.deployment.id`,
    which reads this very flow run from the API when no deployment is in its context: 0.3-0.4 s
    of every `codeeval run`, twice, before the run asked only a subflow)."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = context.flow_run if context else None
    if run is None or run.deployment_id is not None:
        return run is not None
    if run.parent_task_run_id is None:  # a top-level run without a deployment: `codeeval run`'s
        return False
    from prefect.runtime import deployment

    return deployment.id is not None


def worker_policy() -> "WorkerPolicy | None":
    """This worker's policy in a deployment run; None outside one (nothing is refused)."""
    return WorkerPolicy.from_env() if from_deployment() else None


def enforce(policy: "WorkerPolicy | None", request: Request, artifact: str) -> None:
    """Raise RunRefused (after writing the `artifact` summary) if `policy` refuses: the run's log
    (and `--watch`) shows it once, as the exception that ended the run."""
    if policy is None or not (refusals := policy.refusals(request)):
        return
    line = refusal_line(refusals, socket.gethostname())
    create_markdown_artifact(f"# Refused\n\n**{_markdown_text(line)}**\n",
                             key=failures.artifact_key("summary", artifact), description=line[:500])
    raise RunRefused(line, line.split(": ", 1)[0])  # the headline: the run's last line (flows/logs.py)


def _markdown_text(text: str) -> str:
    """The line as text in the UI's markdown (a caller's value may hold markup)."""
    return "".join(f"\\{c}" if c in "\\`*_{}[]<>()#+-.!|" else c for c in text)
