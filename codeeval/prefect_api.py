"""The Prefect API a CLI run talks to: a configured server, or a private temporary one.

Without PREFECT_API_URL, Prefect starts a temporary ("ephemeral") server subprocess on first
use and stops it from an atexit hook, so a SIGKILLed run leaves it behind
(../shared/notes/prefect.md). The CLI starts the same server itself instead: first thing, so
that it boots on the other core while the CLI imports and checks, with a parent-death signal
(SIGKILL) so that it dies with the CLI however the CLI ends. A configured server (the
environment's PREFECT_API_URL, or the active Prefect profile's) is reused as it is.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator, Optional

import tomllib

PR_SET_PDEATHSIG = 1
PORT_IN_USE = 3  # uvicorn's exit status when it cannot bind

# What a one-user temporary server needs (Prefect sets the first three for its own too).
SERVER_ENV = {
    "PREFECT_UI_ENABLED": "0",
    "PREFECT__SERVER_EPHEMERAL": "1",
    "PREFECT__SERVER_FINAL": "1",
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
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    return profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL") or None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent(parent: int) -> None:
    """In the forked child before exec: SIGKILL when the parent thread dies (kept across exec)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


class TemporaryServer:
    """A private Prefect API server for one CLI run (uvicorn, the app Prefect's ephemeral mode runs)."""

    def __init__(self) -> None:
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self.log = tempfile.TemporaryFile()  # its stderr, for the error message if it dies

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self) -> "TemporaryServer":
        """Must be called from the main thread (the parent-death signal follows the creating thread)."""
        import importlib.util

        self.port = _free_port()
        prefect_dir = Path(importlib.util.find_spec("prefect").origin).parent
        parent = os.getpid()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect_dir.parent), "--factory",
             "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(self.port),
             "--log-level", "error", "--lifespan", "on"],
            env={**os.environ, **SERVER_ENV}, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=lambda: _die_with_parent(parent), start_new_session=True,  # Ctrl-C reaches the CLI only
        )
        return self

    def wait_ready(self, timeout_s: float = 120.0) -> str:
        """Block until /health answers; returns the API URL. RuntimeError if the server died."""
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.proc.poll()
            if code == PORT_IN_USE:  # lost a race for the port: try another
                self.start()
                continue
            if code is not None:
                raise RuntimeError(f"the temporary Prefect API server exited with status {code}: {self._tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return self.url
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the temporary Prefect API server did not answer within {timeout_s:g}s")
            time.sleep(0.05)

    def _tail(self) -> str:
        self.log.seek(0)
        lines = self.log.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "no output"

    def stop(self, grace_s: float = 2.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def api_for_run() -> Iterator[Optional[TemporaryServer]]:
    """The API for one CLI run: yields the started temporary server (whose URL is now
    PREFECT_API_URL; wait_ready before the first flow), or None when one is configured. On
    the way out, Prefect's queued logs and events are sent and the server is stopped."""
    server = None
    if not configured_url():
        server = TemporaryServer().start()
        os.environ["PREFECT_API_URL"] = server.url
    try:
        yield server
    finally:
        if server is not None:
            drain()
            server.stop()
            os.environ.pop("PREFECT_API_URL", None)


# Modules a flow run imports on its way (measured: ~480 modules, over a second on 2 cores)
WARM = ("prefect.flow_engine", "prefect.task_engine", "prefect.runtime.flow_run", "prefect.artifacts",
        "fastapi.encoders", "pandas", "pyarrow.compute")


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
