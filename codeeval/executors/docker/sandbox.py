"""Docker sandbox: a pool of long-lived, locked-down containers, one per worker slot.

Each container runs server.py (in the image: /opt/codeeval/docker_server.py) as PID 1, which
executes one program at a time in a fresh forked child (rlimits, a CPU-time limit read from the
container's cgroup, a limit of its clock (wall time less run-queue delay), a wall-clock cap, capped output,
process-group and whole-container kill, scratch wiped between programs). The host talks to it
over the container's attached stdin/stdout (length-prefixed JSON; attached.py), so a program
costs a fork and a round trip instead of a container start (0.2-0.3 s). The engine is reached
through the Docker SDK (engine.py): DOCKER_HOST / the docker context, local or remote.

Containers: --network none, read-only root, size-capped tmpfs scratch, --pids-limit,
--memory (no swap), --cpus, --cap-drop ALL, no-new-privileges, a non-root uid per
slot (written as `docker run` flags, flags.py). A container that dies is replaced
and its program retried once, then recorded as `sandbox_error` (never as a model failure); a
container that cannot start (the engine restarting or gone) is charged to no program: after
MAX_START_FAILURES in a row the run fails with SandboxUnavailable, which the flow retries.
Containers carry a label with their owner process (owners.py); they are removed by close()
(also on Ctrl-C and at interpreter exit), they remove themselves when the owner dies (its
attached stdin closes, auto-remove), and a new sandbox removes any whose owner is gone.
Limits and defaults: docs/security.md.
"""
from __future__ import annotations

import base64
import dataclasses
import os
import threading
import time
import uuid
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Optional, Sequence

from codeeval.core.progress import Progress
from codeeval.executors.base import (
    SANDBOX_ERROR,
    Limits,
    Outcome,
    Program,
    Sandbox,
    classify,
)
from codeeval.executors.docker import engine, images, runtimes
from codeeval.executors.docker.engine import SandboxUnavailable, check_available  # noqa: F401 - the sandbox's API
from codeeval.executors.docker.owners import LABEL, OWNER_LABEL, _owner_id, sweep_stale  # noqa: F401 - ditto
from codeeval.executors.docker.worker import NotStarted, WorkerDied, _Worker  # noqa: F401 - ditto

MAX_START_FAILURES = 4


@dataclass(frozen=True)
class ContainerLimits:
    """Per-container limits (the per-program ones are in base.Limits). 0 = derived default."""

    memory_mb: int = 0  # --memory (= --memory-swap: no swap); default: program memory + the tmpfs sizes + 256
    cpus: float = 1.0  # --cpus: each container runs one program at a time
    pids: int = 0  # --pids-limit; default Limits.nproc + 16
    tmpfs_mb: int = 256  # size of the /tmp scratch tmpfs (program files and captured output)
    shm_mb: int = 64  # --shm-size (/dev/shm, wiped between programs too)
    start_timeout_s: float = 60.0  # how long a new container may take to answer
    grace_s: float = 15.0  # host-side slack over a program's wall-clock cap before the container is declared dead


def default_image() -> str:
    return os.environ.get("CODEEVAL_DOCKER_IMAGE") or images.python_image()


class DockerSandbox(Sandbox):
    name = "docker"

    def __init__(self, n_workers: int = 0, limits: Limits = Limits(), image: Optional[str] = None,
                 container: ContainerLimits = ContainerLimits(), pipeline: int = 2, runtime: str = "python",
                 container_runtime: str = ""):
        self.n_workers = n_workers or os.cpu_count() or 1
        self.pipeline = max(1, pipeline)  # programs queued per container (hides the round trip)
        self.limits = limits
        self.container = container
        compiled = runtime.startswith("multiple-")
        if compiled:  # compiled toolchains (MultiPL-E): executables, caches and threads in the scratch
            container = dataclasses.replace(container, tmpfs_mb=max(container.tmpfs_mb, 1024),
                                            pids=container.pids or max(256, limits.nproc + 16))
            self.container = container
        try:
            self.image = image or (default_image() if runtime == "python" else images.runtime_image(runtime))
        except images.RuntimeUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from None
        scratch = "rw,exec,nosuid,nodev" if compiled else "rw,noexec,nosuid,nodev"
        # Modules the server imports at start. The plain Python image warms none: its programs
        # are mostly stdlib, and a harness's `preimport` (numpy) is warmed on first use.
        self.warm: tuple[str, ...] = () if runtime == "python" else ("numpy",)
        self.owner = _owner_id()
        self.id = uuid.uuid4().hex[:12]  # label value of this sandbox's containers
        self.client = engine.connect(pool=self.n_workers + 4)  # one attached stream per container
        try:
            check_available(self.image, client=self.client)
            # the OCI runtime (runsc: gVisor), resolved on this worker; recorded with each shard
            self.container_runtime = runtimes.engine_runtime(self.client, runtimes.chosen(container_runtime))
            sweep_stale(self.client)
        except ValueError as exc:  # the engine lacks the runtime: nothing may run under another one
            self.client.close()
            raise SandboxUnavailable(str(exc)) from None
        except SandboxUnavailable:
            self.client.close()
            raise
        except Exception as exc:  # noqa: BLE001 - the engine failed between two calls: one line
            self.client.close()
            raise SandboxUnavailable(f"the Docker engine at {engine.engine_url()} failed ({engine.reason(exc)}): "
                                     f"{engine.ENGINE_HINT}") from None
        out_mb = 3 * limits.fsize_mb + 8  # stdout, stderr and the result channel, each capped by RLIMIT_FSIZE
        memory = container.memory_mb or (limits.memory_mb + container.tmpfs_mb + out_mb + container.shm_mb + 256)
        self.run_flags = [
            "--network", "none",
            "--read-only",
            "--tmpfs", f"/tmp:{scratch},size={container.tmpfs_mb}m,mode=1777",
            "--tmpfs", f"/out:rw,noexec,nosuid,nodev,size={out_mb}m,mode=1777",
            "--shm-size", f"{container.shm_mb}m",
            "--pids-limit", str(runtimes.pids_limit(self.processes, self.container_runtime)),
            "--memory", f"{memory}m", "--memory-swap", f"{memory}m",
            "--cpus", f"{container.cpus:g}",
            "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "--ulimit", "core=0",
            "--log-driver", "none",
            "--hostname", "sandbox",
            "--workdir", "/tmp",
            "--runtime", self.container_runtime,
        ]
        self._workers: list[Optional[_Worker]] = [None] * self.n_workers
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._start_failures = 0  # consecutive container starts that failed
        self._closed = False  # set under _lock: no container is added to _workers after it
        # Runs on close(), or at interpreter exit for a sandbox never closed.
        self._finalizer = weakref.finalize(self, DockerSandbox._cleanup, self._workers, self._lock, self.client)

    @property
    def own_kernel(self) -> bool:
        """Whether the runtime gives the container a kernel of its own (gVisor): RLIMIT_NPROC then
        bounds the program's processes (runtimes.OWN_KERNEL)."""
        return self.container_runtime in runtimes.OWN_KERNEL

    @property
    def processes(self) -> int:
        """The processes a program (and, under runc, the server) may have: runc's --pids-limit,
        gVisor's RLIMIT_NPROC for the program's uid."""
        return self.container.pids or self.limits.nproc + 16

    def describe(self) -> dict:
        return {"executor": self.name, "image": self.image, "runtime": self.container_runtime}

    # -- workers --------------------------------------------------------------------------
    def _worker(self, slot: int) -> _Worker:
        if self._closed:
            raise WorkerDied("the sandbox is closing")
        worker = self._workers[slot]
        if worker is None:
            try:
                worker = _Worker(self, slot)
            except WorkerDied as exc:
                with self._lock:
                    self._start_failures += 1
                    broken = self._start_failures >= MAX_START_FAILURES
                if broken:  # the engine or the image is broken: fail the run loudly, not every sample
                    raise SandboxUnavailable(
                        f"{MAX_START_FAILURES} sandbox containers in a row failed to start; last: {exc}") from None
                raise
            with self._lock:
                self._start_failures = 0
                closing = self._closed
                if not closing:
                    self._workers[slot] = worker
            if closing:  # close() ran while this container started: it is ours to remove
                worker.stop()
                raise WorkerDied("the sandbox is closing")
        return worker

    def _discard(self, slot: int) -> None:
        with self._lock:
            worker, self._workers[slot] = self._workers[slot], None
        if worker is not None:
            worker.stop()

    def start(self) -> None:
        """Start every container now (in parallel) instead of at first use."""
        threads = [threading.Thread(target=self._safe_start, args=(slot,), daemon=True)
                   for slot in range(self.n_workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _safe_start(self, slot: int) -> None:
        try:
            self._worker(slot)
        except WorkerDied:  # nothing was stored: run() starts the slot again (and counts failures)
            pass

    # -- running --------------------------------------------------------------------------
    def run(self, programs: Sequence[Program], progress: Progress = None) -> list[Outcome]:
        with self._run_lock:  # one run at a time: the slots are this sandbox's containers
            return self._run(programs, progress)

    def _run(self, programs: Sequence[Program], progress: Progress) -> list[Outcome]:
        if self._closed:
            raise RuntimeError("the Docker sandbox is closed")
        results: list[Optional[Outcome]] = [None] * len(programs)
        pending = deque(range(len(programs)))
        failure: list[BaseException] = []

        def take() -> Optional[int]:
            with self._lock:
                return pending.popleft() if pending and not failure else None

        def loop(slot: int) -> None:
            try:
                self._slot_loop(slot, programs, take, results, progress)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                failure.append(exc)

        threads = [threading.Thread(target=loop, args=(slot,), daemon=True, name=f"docker-slot-{slot}")
                   for slot in range(min(self.n_workers, len(programs)))]
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except BaseException:  # Ctrl-C: remove the containers now, then let it propagate
            self.close()
            raise
        if failure:
            raise failure[0]
        if self._closed:
            raise RuntimeError("the Docker sandbox was closed during run()")
        return [r for r in results]  # type: ignore[misc]

    def _slot_loop(self, slot, programs, take, results, progress) -> None:
        """Feed one container, keeping up to `pipeline` programs queued in it so that it never
        waits for a round trip. When the container dies, the program it was running (the
        oldest unanswered) is charged an attempt; the ones queued behind it are re-sent as they
        were. A program whose container died twice is a sandbox error."""
        retry: deque = deque()  # (index, attempts, errors) to send again, first
        inflight: deque = deque()  # (index, attempts, errors) sent, unanswered, in order
        since = time.monotonic()
        while not self._closed:
            try:
                while len(inflight) < self.pipeline:
                    if retry:
                        item = retry.popleft()
                    else:
                        i = take()
                        if i is None:
                            break
                        item = (i, 0, [])
                    inflight.append(item)  # first: a container that fails to start puts it back (NotStarted)
                    worker = self._worker(slot)  # may start the container: not part of the program's time
                    if len(inflight) == 1:
                        since = time.monotonic()
                    worker.send(programs[item[0]])
                if not inflight:
                    return
                i, _, _ = inflight[0]
                response = self._worker(slot).receive(programs[i], since)
                since = time.monotonic()
                inflight.popleft()
                results[i] = self._outcome(programs[i], response)
                if progress:
                    progress(1)
            except WorkerDied as exc:
                self._discard(slot)
                if self._closed:
                    return
                if isinstance(exc, NotStarted):  # no program ran in it (an engine restarting, gone):
                    retry.extendleft(reversed(inflight))  # none is charged; MAX_START_FAILURES in a row
                    inflight.clear()  # fail the run (SandboxUnavailable: an infrastructure error, retried)
                    continue
                i, attempts, errors = inflight.popleft()
                errors = [*errors, str(exc)]
                retry.extend(inflight)
                inflight.clear()
                if attempts + 1 >= 2:  # a dead container is replaced and its program retried once
                    results[i] = Outcome(programs[i].key, SANDBOX_ERROR, False, None, 0.0, "", "",
                                         "sandbox error: " + " | then: ".join(errors))
                    if progress:
                        progress(1)
                else:
                    retry.appendleft((i, attempts + 1, errors))

    @staticmethod
    def _outcome(program: Program, r: dict) -> Outcome:
        return classify(program, r["exit_code"], r["finished"], r["limit"], r["duration"], r["cpu"],
                        r["stdout"], r["stderr"], base64.b64decode(r.get("result", "")), r.get("slowdown", 1.0))

    # -- clean-up -------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:  # a container still starting sees this and removes itself (_worker)
            self._closed = True
        self._finalizer()

    @staticmethod
    def _cleanup(workers: list, lock: threading.Lock, client) -> None:
        with lock:
            live = [w for w in workers if w is not None]
            for i in range(len(workers)):
                workers[i] = None
        threads = [threading.Thread(target=w.stop, daemon=True) for w in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        client.close()
