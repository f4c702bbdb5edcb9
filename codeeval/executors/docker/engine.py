"""The Docker engine the sandbox drives, through the Docker SDK (PyPI `docker`), not the CLI.

The engine is whatever DOCKER_HOST says (with DOCKER_TLS_VERIFY / DOCKER_CERT_PATH), else the
current docker context (`docker context use NAME`), else the local socket: a cpu-pool worker
drives a local or a remote engine without any change here. Every way of not reaching it
(engine down, a wrong DOCKER_HOST, a TLS failure, an image missing) becomes SandboxUnavailable
with one line that says which engine and what to do.
"""
from __future__ import annotations

import os
import re
from typing import Optional

import docker
import docker.errors
import requests.exceptions

from codeeval.core.errors import Explained, Infrastructure

DEFAULT_ENGINE = "unix:///var/run/docker.sock"
PING_TIMEOUT_S = 10  # the pre-flight check: an engine that does not answer within it is reported
API_TIMEOUT_S = 60  # a create/remove on a loaded engine (the CLI calls had the same limit)
ENGINE_HINT = "start it (`make engine`, scripts/ensure-docker.sh) or point DOCKER_HOST at a running engine"


class SandboxUnavailable(RuntimeError, Infrastructure, Explained):
    """Docker or the execution image is missing: nothing can run (retried: an engine may come back)."""


def engine_url() -> str:
    """Where the engine is, for messages and for connecting: DOCKER_HOST, the docker context, the socket."""
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    context = _context()
    return (context.Host if context is not None else None) or DEFAULT_ENGINE


def _context():
    """DOCKER_CONTEXT's or the current docker context (`docker context use`), unless it is the
    default one: the CLI's order (the SDK alone reads neither)."""
    try:
        from docker.context import ContextAPI

        context = ContextAPI.get_context(os.environ.get("DOCKER_CONTEXT") or None)
    except Exception:  # noqa: BLE001 - an unreadable ~/.docker: the default socket, as the CLI does
        return None
    return None if context is None or context.name == "default" else context


def connect(timeout: float = API_TIMEOUT_S, pool: int = 10) -> docker.DockerClient:
    """A client of the engine (it has answered within PING_TIMEOUT_S: the API version is negotiated
    now); its calls then time out after `timeout` s. `pool`: how many connections it keeps (one
    attached stream per container holds one)."""
    first = min(timeout, PING_TIMEOUT_S)
    try:
        context = None if os.environ.get("DOCKER_HOST") else _context()
        if context is None:
            client = docker.from_env(timeout=first, max_pool_size=pool)
        else:
            client = docker.DockerClient(base_url=context.Host, tls=context.TLSConfig, timeout=first,
                                         max_pool_size=pool)
    except Exception as exc:  # noqa: BLE001 - whatever the SDK raises: one line
        raise unreachable(exc) from None
    client.api.timeout = timeout  # every later request passes it (APIClient._set_request_timeout)
    return client


def unreachable(exc: BaseException) -> SandboxUnavailable:
    """The one-line error for an engine that did not answer (`exc`: what the SDK raised)."""
    return SandboxUnavailable(f"the Docker engine does not answer at {engine_url()} ({reason(exc)}): {ENGINE_HINT}")


def reason(exc: BaseException) -> str:
    """The cause of an SDK/requests error in a few words (`Connection refused`, `No such file or
    directory`, `read timed out`), not urllib3's nested repr."""
    text = str(exc)
    errno = re.findall(r"\[Errno -?\d+\] ([^'\")\]]+)|Error\(-?\d+, '([^']+)'\)", text)
    if errno:
        return "".join(errno[-1]).strip()
    if isinstance(exc, (requests.exceptions.Timeout,)) or "timed out" in text.lower():
        return "timed out"
    if isinstance(exc, docker.errors.APIError) and exc.explanation:
        text = str(exc.explanation)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:200]


def check_available(image: str, missing: str = "run `codeeval images build` (or `make images`) to build it",
                    client: Optional[docker.DockerClient] = None) -> None:
    """A running engine and the execution image; SandboxUnavailable with what to run when one
    is missing (also the CLI's pre-flight check). Answers within PING_TIMEOUT_S."""
    own = client is None
    client = client or connect(timeout=PING_TIMEOUT_S)
    try:
        try:
            client.images.get(image)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(f"the execution image {image} is missing from the engine at {engine_url()}: "
                                     f"{missing}") from None
        except Exception as exc:  # noqa: BLE001
            raise unreachable(exc) from None
    finally:
        if own:
            client.close()

