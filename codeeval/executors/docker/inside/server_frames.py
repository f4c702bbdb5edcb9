"""The sandbox server's side of the host channel (stdlib only; in the image beside
docker_server.py): frames of a 4-byte big-endian length followed by UTF-8 JSON, over the Unix
socket the host mounts into the container (channel.py), else over stdin and stdout."""
from __future__ import annotations

import json
import os
import socket
import struct


class Channel:
    """Framed JSON over two fds, buffered so that the server can notice EOF while a program runs."""

    def __init__(self, rfd: int, wfd: int):
        self.rfd, self.wfd = rfd, wfd
        self.buffer = b""
        self.eof = False

    def fill(self) -> None:
        """Read what is available (call when rfd is readable); sets `eof` when the host hung up."""
        chunk = os.read(self.rfd, 1 << 20)
        if chunk:
            self.buffer += chunk
        else:
            self.eof = True

    def _take(self, n: int) -> bytes | None:
        while len(self.buffer) < n:
            if self.eof:
                return None
            self.fill()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive(self) -> dict | None:
        head = self._take(4)
        if head is None:
            return None
        body = self._take(struct.unpack(">I", head)[0])
        return None if body is None else json.loads(body)

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        data = struct.pack(">I", len(body)) + body
        while data:
            data = data[os.write(self.wfd, data):]


def open_channel(argv: list[str]) -> tuple[Channel, list[str]]:
    """The host's channel: the Unix socket named by `--channel PATH` (a read-only bind mount of
    a host directory; channel.py), else stdin and stdout (a remote engine mounts no host
    path). Returns it and the rest of argv."""
    if argv[:1] == ["--channel"]:
        path, argv = argv[1], argv[2:]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
        else:
            fd = sock.detach()
            return Channel(fd, fd), argv
    return Channel(os.dup(0), os.dup(1)), argv
