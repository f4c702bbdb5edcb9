"""Sandboxes kept open for a whole run: every execution shard of a run reuses the same started
containers instead of starting its own (0.3-0.5 s a shard), and the CLI can start them while
it waits for its Prefect server. The run's flow closes the pool when it ends."""
from __future__ import annotations

import threading
from typing import Optional

from codeeval.executors import SandboxSpec, open_sandbox
from codeeval.executors.base import Sandbox


class SandboxPool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[SandboxSpec, Sandbox] = {}
        self._starting: Optional[threading.Thread] = None
        self._closing: list[threading.Thread] = []  # close(wait=False)'s, joined by the next close()

    def get(self, spec: SandboxSpec) -> Sandbox:
        """The run's open sandbox for `spec` (opened now if needed)."""
        starting = self._starting
        if starting is not None:
            starting.join()
        with self._lock:
            if spec not in self._open:
                self._open[spec] = open_sandbox(spec)
            return self._open[spec]

    def prestart(self, spec: SandboxSpec) -> None:
        """Open the sandbox and start its workers in the background; errors surface at `get`."""
        def start() -> None:
            try:
                with self._lock:
                    box = self._open.get(spec) or self._open.setdefault(spec, open_sandbox(spec))
                getattr(box, "start", lambda: None)()
            except Exception:  # noqa: BLE001 - `get` opens it again and raises there
                pass

        self._starting = threading.Thread(target=start, name="sandbox-prestart", daemon=True)
        self._starting.start()

    def close(self, wait: bool = True) -> None:
        """Stops the open sandboxes. wait=False stops them in the background, so that the containers
        go (0.1 s) while the run writes its summary; the next close() waits for them."""
        if self._starting is not None:
            self._starting.join()
            self._starting = None
        with self._lock:
            boxes, self._open = list(self._open.values()), {}
        if not wait:
            stopping = threading.Thread(target=_close_all, args=(boxes,), name="sandbox-close")
            stopping.start()
            with self._lock:
                self._closing.append(stopping)
            return
        _close_all(boxes)
        with self._lock:
            closing, self._closing = self._closing, []
        for stopping in closing:
            stopping.join()


def _close_all(boxes: list[Sandbox]) -> None:
    for box in boxes:
        box.close()


# The process's pool: a run's sandboxes are resources of the process running its flow, like a
# loaded model (codeeval/generation/__init__.py); the flow closes it at its end.
POOL = SandboxPool()
