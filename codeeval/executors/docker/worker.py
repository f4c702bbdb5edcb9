"""One sandbox container and the host side of docker_server.py's protocol: length-prefixed
JSON requests and answers on a Unix socket (channel.py; on a remote engine, its stdin
and stdout), each answer read against a deadline."""
from __future__ import annotations

import base64
import json
import os
import select
import socket
import struct
import time
import uuid
from dataclasses import replace

from codeeval.core.errors import Infrastructure
from codeeval.executors.base import Program, Sandbox, rlimit_spec, safe_name
from codeeval.executors.docker import channel as docker_channel
from codeeval.executors.docker import starts
from codeeval.executors.docker.attached import Attached, StartFailed
from codeeval.executors.docker.hostclocks import HostClocks
from codeeval.executors.docker.owners import LABEL, OWNER_LABEL

SERVER = "/opt/codeeval/docker_server.py"
FIRST_UID = 10000  # the image has users sandbox0..127 = uid 10000..10127
# what a server that runs as root inside gVisor's kernel keeps, to run each program as the slot's
# uid (setuid, setgid, chown its files), to kill it (kill), and to wipe what it left (fowner,
# dac_override); the program, under another uid, has none of them
PROGRAM_UID_CAPS = ("SETUID", "SETGID", "CHOWN", "KILL", "FOWNER", "DAC_OVERRIDE")
N_UIDS = 128


class WorkerDied(Infrastructure):
    """The container stopped answering (died, was killed, or broke the protocol)."""


class NotStarted(WorkerDied):
    """The container never came up (the engine refused or is gone, no greeting): no program ran
    in it, so none is charged for it."""


class _Worker:
    """One container, attached, speaking the server's protocol."""

    def __init__(self, sandbox: "Sandbox", slot: int):
        self.sandbox = sandbox
        self.name = f"codeeval-{os.getpid()}-{uuid.uuid4().hex[:8]}-{slot}"
        uid = FIRST_UID + slot % N_UIDS
        self.conn = None  # the server's socket (channel.py), else its stdin and stdout
        self.host_clocks = None  # under gVisor on a local engine: its waits and CPU, from the host (hostclocks.py)
        with starts.turn():  # its start timeout counts from its turn
            self._start(sandbox, slot, uid)

    def _start(self, sandbox: "Sandbox", slot: int, uid: int) -> None:
        # Under gVisor (own_kernel) the server runs as its kernel's root and each program as the slot's
        # uid: its kernel would let a program of the server's uid signal PID 1 and open /proc/1/fd
        # (runsc also refuses the host's Unix socket: the channel is the attach stream there).
        own = sandbox.own_kernel
        listener = docker_channel.Listener() if docker_channel.local_engine() and not own else None
        channel = ["--channel", docker_channel.SOCKET] if listener else []
        user = ["--user", "0:0", *(f for cap in PROGRAM_UID_CAPS for f in ("--cap-add", cap))] if own else \
            ["--user", f"{uid}:{uid}"]
        self.program_uid = uid if own else None
        self.host_clocks = HostClocks() if own and docker_channel.local_engine() else None
        try:
            self.container = Attached(
                sandbox.client, sandbox.image, ["python3", "-I", SERVER, *channel, *sandbox.warm],
                ["--label", f"{LABEL}={sandbox.id}", "--label", f"{OWNER_LABEL}={sandbox.owner}",
                 *sandbox.run_flags, *(listener.flags if listener else []),
                 *(self.host_clocks.flags if self.host_clocks else []),
                 *user], self.name)
        except StartFailed as exc:
            if listener is not None:
                listener.close()
            if self.host_clocks is not None:
                self.host_clocks.close()
            raise NotStarted(str(exc)) from None
        try:
            if self.host_clocks is not None:  # its host process (the Sentry) is in the container's cgroup
                self.host_clocks.follow(self.container.host_pid(), self.name)
            self.hello = self._greeting(listener, uid, time.monotonic() + sandbox.container.start_timeout_s)
        except WorkerDied as exc:
            self.stop()
            raise NotStarted(str(exc)) from None
        except BaseException:
            self.stop()
            raise

    def _greeting(self, listener, uid: int, deadline: float) -> dict:
        """The server's hello (its pid, uid, python and CPU clock), on its socket if it connects."""
        self.rfd = self.container.stdout_fd
        if listener is not None:
            try:
                self.conn = listener.accept(uid, self.rfd, deadline)
            except (TimeoutError, PermissionError) as exc:
                raise WorkerDied(f"{exc}; {self.diagnosis()}") from None
            finally:
                listener.close()
            if self.conn is not None:
                self.rfd = self.conn.fileno()
        hello = self._receive(deadline)
        if not hello.get("ready"):
            raise WorkerDied(f"unexpected greeting {hello!r}")
        return hello

    def send(self, program: Program) -> None:
        """Queue a program (the server runs its requests one at a time, in order)."""
        limits = self.sandbox.limits
        request = {
            "key": program.key, "code": program.code, "timeout": program.timeout_s, "clock": program.clock_limit_s,
            "wall": program.wall_cap_s,
            "guard": program.guard,
            # No RLIMIT_NPROC under runc: the kernel counts it per uid host-wide (no user namespace),
            # so containers would share it; the container's --pids-limit bounds the processes. Under
            # gVisor the sandbox's own kernel counts it, for this container alone (runtimes.OWN_KERNEL).
            "rlimits": rlimit_spec(replace(limits, nproc=self.sandbox.processes), program.timeout_s,
                                   nproc=self.sandbox.own_kernel),
            "tail": limits.tail_bytes,
            "result_bytes": limits.result_bytes, "preimport": list(program.preimport),
            "speed_reference": limits.speed_reference_s,
            "merge_stderr": program.merge_stderr,
            **({"uid": self.program_uid} if self.program_uid is not None else {}),
            "files": {safe_name(n): base64.b64encode(d).decode() for n, d in program.files.items()},
        }
        body = json.dumps(request).encode()
        frame = struct.pack(">I", len(body)) + body
        try:
            if self.conn is not None:
                self.conn.sendall(frame)
            else:
                self.container.write(frame)
        except (OSError, ValueError, AttributeError) as exc:
            raise WorkerDied(f"cannot send to the container: {exc}; {self.diagnosis()}") from None

    def receive(self, program: Program, since: float) -> dict:
        """The answer for `program`, the oldest one sent; it may have started at `since` at the earliest."""
        # the server ends every program by its wall-clock cap (a slow or crowded host included)
        response = self._receive(since + program.wall_cap_s + self.sandbox.container.grace_s)
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
        err = self.container.stderr()[-500:]
        return f"{self.name}: {self.container.state()}" + (f"; stderr: {err}" if err else "")

    def stop(self) -> None:
        """Hang up (the server exits, auto-remove deletes the container) and make sure it is gone."""
        if self.conn is not None:  # shut down, not closed yet: a thread may be select()ing on it
            try:
                self.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.container.close_stdin()
        self.container.remove()
        if self.conn is not None:
            self.conn.close()
        if self.host_clocks is not None:
            self.host_clocks.close()
