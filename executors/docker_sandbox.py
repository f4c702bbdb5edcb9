"""Docker sandbox: a pool of long-lived, locked-down containers, one per worker slot.

Each container runs `docker_server.py` as PID 1, which executes one program at a time
in a fresh forked child (rlimits, a CPU-time limit read from the container's cgroup, a
wall-clock backstop, capped output, process-group and whole-container kill, scratch wiped
between programs). The host talks to it over the `docker run -i` client's stdin/stdout
(length-prefixed JSON), so a program costs a fork and a round trip instead of a
`docker run` (0.2-0.3 s).

Containers: --network none, read-only root, size-capped tmpfs scratch, --pids-limit,
--memory (no swap), --cpus, --cap-drop ALL, no-new-privileges, a non-root uid per
slot. A container that dies is replaced and its program retried once, then recorded
as `sandbox_error` (never as a model failure). Containers carry a label with their
owner process; they are removed by close() (also on Ctrl-C and at interpreter exit),
they remove themselves when the owner dies (stdin closes, --rm), and a new sandbox
removes any whose owner is gone. Limits and defaults: docs/security.md.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Optional, Sequence

from codeeval.executors import cputime, images
from codeeval.executors.base import (
    SANDBOX_ERROR, Limits, Outcome, Program, Progress, Sandbox, classify, rlimit_spec, safe_name,
)

LABEL = "codeeval.sandbox"
OWNER_LABEL = "codeeval.owner"
SERVER = "/opt/codeeval/docker_server.py"
FIRST_UID = 10000  # the image has users sandbox0..127 = uid 10000..10127
N_UIDS = 128
MAX_START_FAILURES = 4


class SandboxUnavailable(RuntimeError):
    """Docker or the execution image is missing: nothing can run."""


class WorkerDied(Exception):
    """The container stopped answering (died, was killed, or broke the protocol)."""


@dataclass(frozen=True)
class ContainerLimits:
    """Per-container limits (the per-program ones are in base.Limits). 0 = derived default."""

    memory_mb: int = 0  # --memory (= --memory-swap: no swap); default: program memory + the tmpfs sizes + 256
    cpus: float = 1.0  # --cpus: each container runs one program at a time
    pids: int = 0  # --pids-limit; default Limits.nproc + 16
    tmpfs_mb: int = 256  # size of the /tmp scratch tmpfs (program files and captured output)
    shm_mb: int = 64  # --shm-size (/dev/shm, wiped between programs too)
    start_timeout_s: float = 60.0  # how long a new container may take to answer
    grace_s: float = 15.0  # host-side slack over a program's wall backstop before the container is declared dead


def _owner_id(pid: int | None = None) -> str:
    """host/boot/pid/start-time of a process: unique even when pids are reused."""
    pid = pid or os.getpid()
    try:
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()[:8]
    except OSError:
        boot = "noboot"
    return f"{socket.gethostname()}/{boot}/{pid}/{_start_time(pid)}"


def _start_time(pid: int) -> str:
    try:
        stat = open(f"/proc/{pid}/stat").read()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def _owner_alive(owner: str) -> bool:
    try:
        host, boot, pid, start = owner.split("/")
    except ValueError:
        return False
    if host != socket.gethostname():
        return True  # another machine's container on a shared engine: not ours to judge
    if _owner_id(int(pid)) == owner:
        return True
    return False


def sweep_stale(docker: str = "docker") -> list[str]:
    """Remove sandbox containers whose owner process is gone (a crashed run). Returns their names."""
    out = subprocess.run(
        [docker, "ps", "-a", "--filter", f"label={LABEL}", "--format",
         '{{.Names}}\t{{.Label "' + OWNER_LABEL + '"}}'],
        capture_output=True, text=True, timeout=60,
    )
    stale = []
    for line in out.stdout.splitlines():
        name, _, owner = line.partition("\t")
        if name and not _owner_alive(owner):
            stale.append(name)
    if stale:
        subprocess.run([docker, "rm", "-f", *stale], capture_output=True, timeout=120)
        _wait_removed(docker, stale)
    return stale


def _wait_removed(docker: str, names: list[str], seconds: float = 10.0) -> None:
    """Wait until the containers are gone (an --rm removal may still be in progress)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = subprocess.run([docker, "inspect", "--format", "{{.Name}}", *names], capture_output=True, timeout=60)
        if not left.stdout.strip():
            return
        time.sleep(0.1)


def default_image() -> str:
    return os.environ.get("CODEEVAL_DOCKER_IMAGE") or images.python_image()


def check_available(image: str, docker: str = "docker",
                    missing: str = "run `make images` (bash containers/build.sh) to build it") -> None:
    """The docker client, a running engine and the execution image; SandboxUnavailable with
    what to run when one is missing (also the CLI's pre-flight check)."""
    if shutil.which(docker) is None:
        raise SandboxUnavailable(
            "the Docker sandbox needs the docker client: run `make engine` (scripts/ensure-docker.sh), "
            "or use --executor local for trusted code")
    try:
        info = subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        raise SandboxUnavailable("the Docker engine did not answer within 20 s: run `make engine` "
                                 "(scripts/ensure-docker.sh)") from None
    if info.returncode != 0:
        detail = (info.stderr.strip().splitlines() or ["no answer"])[-1][:200]
        raise SandboxUnavailable(f"the Docker engine does not answer ({detail}): run `make engine` "
                                 "(scripts/ensure-docker.sh)")
    found = subprocess.run([docker, "image", "inspect", image], capture_output=True, timeout=60)
    if found.returncode != 0:
        raise SandboxUnavailable(f"the execution image {image} is missing: {missing}")


class _Worker:
    """One container and the `docker run -i` client attached to it."""

    def __init__(self, sandbox: "DockerSandbox", slot: int):
        self.sandbox = sandbox
        self.name = f"codeeval-{os.getpid()}-{uuid.uuid4().hex[:8]}-{slot}"
        self.stderr = tempfile.TemporaryFile()
        uid = FIRST_UID + slot % N_UIDS
        self.proc = subprocess.Popen(
            [*sandbox.docker_cmd, "run", "-i", "--rm", "--name", self.name,
             "--label", f"{LABEL}={sandbox.id}", "--label", f"{OWNER_LABEL}={sandbox.owner}",
             *sandbox.run_flags, "--user", f"{uid}:{uid}",
             sandbox.image, "python3", "-I", SERVER],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            start_new_session=True,  # a Ctrl-C in the terminal reaches us, not the client: close() cleans up
            bufsize=0,
        )
        self.rfd = self.proc.stdout.fileno()
        try:
            hello = self._receive(time.monotonic() + sandbox.container.start_timeout_s)
            if not hello.get("ready"):
                raise WorkerDied(f"unexpected greeting {hello!r}")
            self.hello = hello  # the server's pid, uid, python and CPU clock
        except BaseException:
            self.stop()
            raise

    def send(self, program: Program) -> None:
        """Queue a program (the server runs its requests one at a time, in order)."""
        limits = self.sandbox.limits
        request = {
            "key": program.key, "code": program.code, "timeout": program.timeout_s, "wall": program.backstop_s,
            "guard": program.guard,
            # No RLIMIT_NPROC: the kernel counts it per uid host-wide (no user namespace), so
            # containers would share it; the container's --pids-limit bounds the processes.
            "rlimits": rlimit_spec(limits, program.timeout_s, nproc=False), "tail": limits.tail_bytes,
            "result_bytes": limits.result_bytes, "preimport": list(program.preimport),
            "speed_reference": limits.speed_reference_s,
            "merge_stderr": program.merge_stderr,
            "files": {safe_name(n): base64.b64encode(d).decode() for n, d in program.files.items()},
        }
        body = json.dumps(request).encode()
        data = memoryview(struct.pack(">I", len(body)) + body)
        try:
            fd = self.proc.stdin.fileno()
            while data:  # an unbuffered pipe may take part of a large frame
                data = data[os.write(fd, data):]
        except (OSError, ValueError) as exc:
            raise WorkerDied(f"cannot send to the container: {exc}; {self.diagnosis()}") from None

    def receive(self, program: Program, since: float) -> dict:
        """The answer for `program`, the oldest one sent; it may have started at `since` at the earliest."""
        # the server may stretch the backstop up to MAX_SLOWDOWN times (slow or crowded host)
        response = self._receive(since + program.backstop_s * cputime.MAX_SLOWDOWN + self.sandbox.container.grace_s)
        if response.get("key") != program.key:
            raise WorkerDied(f"protocol error: answer for {response.get('key')!r}, expected {program.key!r}")
        return response

    def _read_exact(self, n: int, deadline: float) -> bytes:
        chunks, got = [], 0
        while got < n:
            left = max(0.0, deadline - time.monotonic())
            try:  # past the deadline, one last look (timeout 0): the answer may be there already
                ready, _, _ = select.select([self.rfd], [], [], left)
                if not ready:
                    if left > 0:
                        continue
                    raise WorkerDied(f"no answer from the container in time; {self.diagnosis()}")
                chunk = os.read(self.rfd, n - got)
            except (OSError, ValueError) as exc:
                raise WorkerDied(f"lost the container's output: {exc}") from None
            if not chunk:
                raise WorkerDied(f"the container closed its output; {self.diagnosis()}")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _receive(self, deadline: float) -> dict:
        size = struct.unpack(">I", self._read_exact(4, deadline))[0]
        if size > 64 * 1024 * 1024:
            raise WorkerDied(f"protocol error: frame of {size} bytes")
        try:
            return json.loads(self._read_exact(size, deadline))
        except ValueError as exc:
            raise WorkerDied(f"protocol error: {exc}") from None

    def diagnosis(self) -> str:
        code = self.proc.poll()
        try:
            self.stderr.seek(0)
            err = self.stderr.read()[-500:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            err = ""
        state = "running" if code is None else f"docker run exited {code}"
        return f"{self.name}: {state}" + (f"; stderr: {err}" if err else "")

    def stop(self) -> None:
        """Close the container's stdin (the server exits, --rm removes it) and make sure it is gone."""
        try:
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        subprocess.run([*self.sandbox.docker_cmd, "rm", "-f", self.name], capture_output=True, timeout=60)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        try:
            self.proc.stdout.close()
        except OSError:
            pass
        self.stderr.close()


class DockerSandbox(Sandbox):
    name = "docker"

    def __init__(self, n_workers: int = 0, limits: Limits = Limits(), image: Optional[str] = None,
                 container: ContainerLimits = ContainerLimits(), docker: str = "docker", pipeline: int = 2,
                 runtime: str = "python"):
        self.n_workers = n_workers or os.cpu_count() or 1
        self.pipeline = max(1, pipeline)  # programs queued per container (hides the round trip)
        self.limits = limits
        self.container = container
        self.docker_cmd = [docker]
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
        self.owner = _owner_id()
        self.id = uuid.uuid4().hex[:12]  # label value of this sandbox's containers
        check_available(self.image, docker)
        sweep_stale(docker)
        out_mb = 3 * limits.fsize_mb + 8  # stdout, stderr and the result channel, each capped by RLIMIT_FSIZE
        memory = container.memory_mb or (limits.memory_mb + container.tmpfs_mb + out_mb + container.shm_mb + 256)
        self.run_flags = [
            "--network", "none",
            "--read-only",
            "--tmpfs", f"/tmp:{scratch},size={container.tmpfs_mb}m,mode=1777",
            "--tmpfs", f"/out:rw,noexec,nosuid,nodev,size={out_mb}m,mode=1777",
            "--shm-size", f"{container.shm_mb}m",
            "--pids-limit", str(container.pids or limits.nproc + 16),
            "--memory", f"{memory}m", "--memory-swap", f"{memory}m",
            "--cpus", f"{container.cpus:g}",
            "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "--ulimit", "core=0",
            "--log-driver", "none",
            "--hostname", "sandbox",
            "--workdir", "/tmp",
        ]
        self._workers: list[Optional[_Worker]] = [None] * self.n_workers
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._start_failures = 0  # consecutive container starts that failed
        self._closed = False  # set under _lock: no container is added to _workers after it
        # Runs on close(), or at interpreter exit for a sandbox never closed.
        self._finalizer = weakref.finalize(self, DockerSandbox._cleanup, self._workers, self._lock)

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
                    inflight.append(item)  # first: a container that fails to start is charged to it
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
        return classify(program, r["exit_code"], r["finished"], r["wall_expired"], r["duration"], r["cpu"],
                        r["stdout"], r["stderr"], base64.b64decode(r.get("result", "")), r.get("slowdown", 1.0))

    # -- clean-up -------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:  # a container still starting sees this and removes itself (_worker)
            self._closed = True
        self._finalizer()

    @staticmethod
    def _cleanup(workers: list, lock: threading.Lock) -> None:
        with lock:
            live = [w for w in workers if w is not None]
            for i in range(len(workers)):
                workers[i] = None
        threads = [threading.Thread(target=w.stop, daemon=True) for w in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
