"""A container started the way `docker run -i --rm` starts one, through the Docker SDK.

Created with an open stdin that closes when the one attached client goes (StdinOnce: our
process exiting or dying closes it, so the program in it sees EOF and exits, and auto-remove
deletes it), attached BEFORE it starts (no output is lost: there are no logs to replay), then
started. The attach stream is the Engine API's hijacked connection; without a TTY it carries
stdout and stderr as frames (8-byte header: stream, 0, 0, 0, big-endian size). A pump thread
demultiplexes them: stdout (or both, merged) into a pipe whose read end is `stdout_fd` --
select()-able, with EOF when the container's output ends, exactly what the CLI client's stdout
was -- and stderr into a bounded tail for diagnoses. Reading the socket in a thread (not with
select on it) is also what keeps TLS engines right: decrypted bytes may wait in the SSL buffer.
"""
from __future__ import annotations

import os
import socket
import struct
import threading
from collections import deque
from typing import Optional, Sequence

from codeeval.executors.docker import owners
from codeeval.executors.docker.engine import SandboxUnavailable, engine_url, reason
from codeeval.executors.docker.flags import create_args

STDOUT, STDERR = 1, 2
HEADER = struct.Struct(">BxxxI")


class StartFailed(RuntimeError):
    """The engine would not create, attach or start the container (one line: why)."""


class Attached:
    """One container with its stdin, stdout and stderr attached."""

    def __init__(self, client, image: str, command: Sequence[str], flags: Sequence[str], name: str,
                 merge_stderr: bool = False, stderr_bytes: int = 4096, auto_remove: bool = True):
        self.api = client.api
        self.name = name
        self.merge = merge_stderr
        self.stderr_tail: deque = deque()
        self._stderr_bytes, self._stderr_size = stderr_bytes, 0
        self.sock: Optional[socket.socket] = None
        self._keep = self._pump = None
        self.stdout_fd = -1
        config, host = create_args(["--name", name, *(["--rm"] if auto_remove else []), *flags])
        try:
            # detach=False + stdin_open: AttachStdin/out/err and StdinOnce, as `docker run -i`
            self.api.create_container(image, list(command), stdin_open=True, detach=False,
                                      host_config=self.api.create_host_config(**host), **config)
        except Exception as exc:  # noqa: BLE001 - engine down, image missing, bad flag value: one line
            raise StartFailed(f"cannot create {name} on {engine_url()}: {reason(exc)}") from None
        try:
            raw = self.api.attach_socket(name, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            self._keep = raw  # the SDK's wrapper owns the response; it must live as long as the socket
            self.sock = getattr(raw, "_sock", raw)
            self.sock.settimeout(None)  # the SDK's API timeout would cut a long-running program's stream
            rfd, self._wfd = os.pipe()
            self.stdout_fd = rfd
            self._pump = threading.Thread(target=self._demux, daemon=True, name=f"attach-{name}")
            self._pump.start()
            self.api.start(name)
        except Exception as exc:  # noqa: BLE001
            self.remove()
            raise StartFailed(f"cannot start {name} on {engine_url()}: {reason(exc)}") from None

    def _demux(self) -> None:
        buf = bytearray()
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return
                buf += chunk
                while len(buf) >= HEADER.size:
                    stream, size = HEADER.unpack_from(buf)
                    if len(buf) < HEADER.size + size:
                        break
                    payload = bytes(buf[HEADER.size:HEADER.size + size])
                    del buf[:HEADER.size + size]
                    if stream == STDOUT or self.merge:
                        self._write(payload)
                    else:
                        self._keep_stderr(payload)
        except OSError:  # the socket was closed under us (stop), or the read end is gone (EPIPE)
            return
        finally:
            os.close(self._wfd)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._wfd, view):]

    def _keep_stderr(self, data: bytes) -> None:
        self.stderr_tail.append(data)
        self._stderr_size += len(data)
        while self._stderr_size > self._stderr_bytes and len(self.stderr_tail) > 1:
            self._stderr_size -= len(self.stderr_tail.popleft())

    def write(self, data: bytes) -> None:
        """To the container's stdin (all of it)."""
        self.sock.sendall(data)

    def stderr(self) -> str:
        return b"".join(self.stderr_tail)[-self._stderr_bytes:].decode("utf-8", "replace").strip()

    def close_stdin(self) -> None:
        """EOF on the container's stdin (StdinOnce): the half-close the CLI client does."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except (OSError, AttributeError):
            pass

    def wait(self, timeout: float) -> Optional[int]:
        """The container's exit code, or None if it still runs after `timeout` seconds (or is gone:
        use auto_remove=False for a container whose exit code matters)."""
        try:
            return self.api.wait(self.name, timeout=timeout)["StatusCode"]
        except Exception:  # noqa: BLE001 - a read timeout, or it is gone already
            return None

    def state(self) -> str:
        """What the engine says about the container, for diagnoses."""
        try:
            state = self.api.inspect_container(self.name)["State"]
        except Exception as exc:  # noqa: BLE001
            return "removed" if "404" in str(exc) or "No such" in str(exc) else f"unknown ({reason(exc)})"
        if state.get("Running"):
            return "running"
        return f"exited {state.get('ExitCode')}" + (" (out of memory)" if state.get("OOMKilled") else "")

    def host_pid(self) -> int:
        """The host's pid of the container's first process (gVisor's Sentry under runsc); 0 if unknown."""
        try:
            return int(self.api.inspect_container(self.name)["State"]["Pid"])
        except Exception:  # noqa: BLE001 - gone already
            return 0

    def kill(self) -> None:
        try:
            self.api.kill(self.name)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def remove(self) -> None:
        """Force-remove it and release the stream: the pump ends (a shutdown wakes its recv; closing
        the pipe's read end ends a write nobody reads), then the socket and the pipe are closed."""
        try:
            owners.remove(self.api, self.name)
        except Exception:  # noqa: BLE001 - the engine went away: its containers went with it, or will be swept
            pass
        if self.sock is None:
            return
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._pump is not None:
            self._pump.join(2)
            try:
                os.close(self.stdout_fd)
            except OSError:
                pass
            self._pump.join(2)
        for closing in (self.sock, self._keep):
            try:
                closing.close()
            except Exception:  # noqa: BLE001
                pass
        self.sock = None


__all__ = ["Attached", "StartFailed", "SandboxUnavailable"]
