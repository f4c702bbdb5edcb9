"""The Prefect API a CLI run talks to: a configured server, or a private temporary one.

Without PREFECT_API_URL, Prefect starts a temporary ("ephemeral") server subprocess on first
use and stops it from an atexit hook, so a SIGKILLed run leaves it behind
(../shared/notes/prefect.md). The CLI starts the same server itself instead: first thing, so
that it boots on the other core while the CLI imports and checks, with a parent-death signal
(SIGKILL) so that it dies with the CLI if the CLI is killed. At the CLI's end it is told to
stop and detaches: it writes the run's last events and exits by itself, within
SHUTDOWN_LIMIT_S. A configured server (the environment's PREFECT_API_URL, or the active
Prefect profile's) is reused as it is.

The server is the long pole of a command's fixed cost (docs/architecture.md), so it boots lean:
the CLI binds its socket (no port to race for, and the first request queues in the kernel until
the app is up), and the server imports with the cyclic GC paused (`serve` below).
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import tomllib

from codeeval import prefect_compat
from codeeval.core import environment
from codeeval.core.processes import PR_SET_PDEATHSIG, PRIVATE_API_ENV, die_with_parent
from codeeval.team_server import prefect_home

SHUTDOWN_LIMIT_S = 10  # a stopping server that has not exited by then is killed (SIGALRM)

# What a one-user temporary server needs; its app is built as Prefect's own temporary server's
# (prefect_compat.api_app), but without PREFECT__SERVER_FINAL, whose only effect with FastAPI
# >= 0.137 is a 0.15 s gc.collect().
SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
}


def configured_url() -> Optional[str]:
    """PREFECT_API_URL from Prefect's settings when Prefect is loaded already (a test harness or a
    caller's temporary settings), else the environment's, else the active profile's."""
    if "prefect.settings" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        return PREFECT_API_URL.value() or None
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or prefect_home() / "profiles.toml").expanduser()
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    return profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL") or None


class TemporaryServer:
    """A private Prefect API server for one CLI run (uvicorn, the app Prefect's ephemeral mode runs)."""

    def __init__(self) -> None:
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self.detached = -1  # read end of the pipe on which the server says it has detached
        self.log = tempfile.TemporaryFile()  # its stderr, for the error message if it dies
        self.note: Optional[str] = None  # the Prefect patches skipped, said once the run adopts it

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self) -> "TemporaryServer":
        """Must be called from the main thread (the parent-death signal follows the creating thread).
        Prefect patches that were not tested on this Prefect are skipped (`note` says which)."""
        patches, self.note = prefect_compat.gate()
        parent = os.getpid()
        self.detached, detach = os.pipe()  # the server writes a byte once it no longer dies with us
        with socket.socket() as sock:  # bound and listening here: the server inherits it
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)
            self.port = sock.getsockname()[1]
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "codeeval.prefect_api", str(sock.fileno()), str(detach), *patches],
                env={**os.environ, **SERVER_ENV}, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                pass_fds=(sock.fileno(), detach), start_new_session=True,  # Ctrl-C reaches the CLI only
                preexec_fn=lambda: die_with_parent(parent),
            )
        os.close(detach)
        return self

    def wait_ready(self, timeout_s: float = 120.0) -> str:
        """Block until /health answers; returns the API URL. RuntimeError if the server died."""
        import urllib.error  # here: the CLI starts the server before it imports anything it can defer
        import urllib.request

        deadline = time.monotonic() + timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                raise RuntimeError(f"the temporary Prefect API server exited with status {code}: {self._tail()}")
            try:  # the connection queues until the app accepts it: the answer comes as soon as it is up
                with urllib.request.urlopen(f"{self.url}/health", timeout=0.5) as response:
                    if response.status == 200:
                        return self.url
            except (urllib.error.URLError, OSError):
                time.sleep(0.01)
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the temporary Prefect API server did not answer within {timeout_s:g}s")

    def _tail(self) -> str:
        """The server's cause of death: its last exception line, else its last line."""
        self.log.seek(0)
        lines = [ln for ln in self.log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b", ln)]
        return (errors or lines or ["no output"])[-1].strip()

    def stop(self) -> None:
        """Ask the server to stop, and return once it has detached from this process: it finishes
        writing the run's last events on its own, within SHUTDOWN_LIMIT_S, outliving the CLI by a
        moment if need be (`serve`). Waiting for uvicorn's shutdown cost every command 0.2 s."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            select.select([self.detached], [], [], 2.0)  # a byte, or end of file if SIGTERM killed it
        os.close(self.detached)
        self.proc = None


def private_server() -> Optional[TemporaryServer]:
    """A temporary server, started, unless an API is configured (None)."""
    return None if configured_url() else TemporaryServer().start()


@contextlib.contextmanager
def api_for_run(started: Optional[TemporaryServer] = None) -> Iterator[Optional[TemporaryServer]]:
    """The API for one CLI run: yields the temporary server (`started`, the one the CLI started
    first thing, else one started now; its URL is now PREFECT_API_URL; wait_ready before the
    first flow), or None when one is configured. On the way out, Prefect's queued logs and
    events are sent and the server is stopped."""
    server = started or private_server()
    private = {}
    if server is not None:
        if server.note:
            print(server.note, file=sys.stderr, flush=True)
        private = {"PREFECT_API_URL": server.url,
                   PRIVATE_API_ENV: "1"}  # its slots' holders are all of this host (tasks/slot_holders.py)
        if (ca_file := loopback_ca_file()) is not None:
            private[CA_FILE_SETTING] = ca_file
    with environment.restored(private):
        os.environ.update(private)
        try:
            yield server
        finally:
            if server is not None:
                drain()
                server.stop()


CA_FILE_SETTING = "PREFECT_API_SSL_CERT_FILE"
CA_FILE_NAME = "codeeval-loopback-ca.pem"
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\n.*?\n-----END CERTIFICATE-----\n", re.S)


def loopback_ca_file() -> Optional[str]:
    """A CA file of one certificate (certifi's first) for Prefect's clients of the private API, or
    None if it cannot be written. That API is plain HTTP on 127.0.0.1, so no certificate is ever
    checked, yet each Prefect client builds a verifying SSL context from certifi's whole bundle
    first (~150 certificates: 30-60 ms a client, four of them in a flow's first second)."""
    path = prefect_home() / CA_FILE_NAME
    if path.is_file():
        return str(path)
    try:
        import certifi

        from codeeval.core import files  # once per PREFECT_HOME: not in the CLI's first moment

        first = _PEM.search(Path(certifi.where()).read_text(encoding="ascii"))
        if first is None:
            return None
        files.write_bytes(path, first.group(0).encode("ascii"))  # runs that start together write the same bytes
    except (ImportError, OSError):
        return None
    return str(path)


# Modules a flow run imports on its way (measured: ~480 modules, over a second on 2 cores)
WARM = ("prefect.flow_engine", "prefect.task_engine", "prefect.runtime.flow_run", "prefect.artifacts",
        "fastapi.encoders", "pandas", "pyarrow.compute", "tqdm")


def warm_up() -> None:
    """Import what the flow will import, while the temporary server boots (the CLI waits anyway)."""
    for name in WARM:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


@contextlib.contextmanager
def run_settings(server: Optional[TemporaryServer]) -> Iterator[None]:
    """Flow-run heartbeats tell a long-lived server that a run crashed; a private server dies
    with the run, so they only cost its end a join of up to a second: off there."""
    if server is None:
        yield
        return
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def drain() -> None:
    """Send Prefect's queued logs and events while its server still runs (else its exit hooks
    retry against a stopped server)."""
    if "prefect.logging.handlers" not in sys.modules:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        try:
            worker.drain_all(timeout=5)
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


def _server_class(detach: int):
    import uvicorn

    class DetachingServer(uvicorn.Server):
        """Told to stop by the CLI (SIGTERM), it no longer dies with the CLI, so that its graceful
        shutdown (the event persister's last batch) completes after the CLI has returned; SIGALRM
        bounds that shutdown. Killed with the CLI otherwise (a SIGKILLed run)."""

        def handle_exit(self, sig, frame) -> None:
            if sig == signal.SIGTERM and not self.should_exit:
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
                signal.alarm(SHUTDOWN_LIMIT_S)
                os.write(detach, b"1")
            super().handle_exit(sig, frame)

    return DetachingServer


def serve(fd: int, detach: int, patches: tuple[str, ...]) -> None:
    """The temporary server's process: Prefect's API app on the socket the CLI bound (fd), built
    with the cyclic GC paused (0.45 s of a 2.8 s boot on these machines) and the gated Prefect
    `patches` (prefect_compat); `detach` is the pipe on which it tells the CLI that it will
    finish on its own."""
    from codeeval.core.memory import gc_paused

    with gc_paused():
        import uvicorn

        app = prefect_compat.api_app(patches)
    server = _server_class(detach)(uvicorn.Config(app, log_level="error", lifespan="on"))
    server.run(sockets=[socket.socket(fileno=fd)])
    sys.stderr.flush()
    os._exit(0 if server.started else 3)  # everything is written: no teardown of a million objects


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), tuple(sys.argv[3:]))
