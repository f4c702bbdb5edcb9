"""How hard the openai backend presses a server: how many requests it keeps in flight (Pace) and when
it takes the server for stuck (Watch). Why this way: codeeval/generation/api/client.py.

Pace: concurrency backs off when answers slow down. A first token that comes more than SLOW times and
SLACK_S seconds later than the quickest one seen means the server is queueing our requests, so the
limit halves (once per round: answers to requests sent before a halving do not halve it again); so do
a stall and a 429/503. It grows back by one after `limit` answers in a row that were not slow.

Watch: the server's last sign of life is the last byte it sent on any of the call's connections; once
it has been silent for `stall_s` while requests are in flight, every one of them is closed (their
readers raise and are sent again) and `stall_s` doubles.
"""
from __future__ import annotations

import http.client
import math
import socket
import threading
import time
from typing import Optional


class Cancelled(Exception):
    """The call ended (another request failed) before this one could start."""


class Pace:
    """How many requests may be in flight at once (see the module's docstring)."""

    SLOW = 4.0
    SLACK_S = 2.0

    def __init__(self, limit: int):
        self.top = self.limit = self.lowest = max(1, limit)
        self.cond = threading.Condition()
        self.in_flight = self.epoch = self.good = 0
        self.quickest = math.inf
        self.closed = False

    def acquire(self) -> int:
        with self.cond:
            while self.in_flight >= self.limit and not self.closed:
                self.cond.wait()
            if self.closed:
                raise Cancelled()
            self.in_flight += 1
            return self.epoch

    def release(self, epoch: int, first_s: Optional[float] = None, busy: Optional[str] = None) -> Optional[str]:
        """A request sent in `epoch` ended; returns a line when the limit fell to a new low."""
        with self.cond:
            self.in_flight -= 1
            said = None
            if busy:
                said = self._halve(epoch, busy)
            elif first_s is not None:
                self.quickest = min(self.quickest, first_s)
                if first_s > max(self.SLOW * self.quickest, self.quickest + self.SLACK_S):
                    said = self._halve(epoch, f"a first token after {first_s:.1f} s (the quickest: "
                                              f"{self.quickest:.1f} s): the server queues our requests")
                else:
                    self.good += 1
                    if self.good >= self.limit and self.limit < self.top:
                        self.limit, self.good = self.limit + 1, 0
            self.cond.notify_all()
            return said

    def _halve(self, epoch: int, why: str) -> Optional[str]:
        if epoch != self.epoch or self.limit == 1:
            return None
        old, self.limit, self.good = self.limit, max(1, self.limit // 2), 0
        self.epoch += 1
        if self.limit < self.lowest:
            self.lowest = self.limit
            return f"{why}; at most {self.limit} request{'s' * (self.limit > 1)} at once (was {old})"
        return None

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class Watch:
    """The server's last sign of life (a byte on any connection in flight); a thread that closes every
    connection in flight once the server has been silent for `stall_s`, and doubles `stall_s`."""

    def __init__(self, stall_s: float):
        self.stall_s = stall_s
        self.fired_s = stall_s  # the limit that the last stall outlived
        self.lock = threading.Lock()
        self.conns: dict[int, http.client.HTTPConnection] = {}
        self.stalled: set[int] = set()
        self.last = time.monotonic()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="openai-watch", daemon=True)
        self.thread.start()

    def opened(self, conn) -> None:
        with self.lock:
            if not self.conns:
                self.last = time.monotonic()  # nothing was in flight: no silence to count yet
            self.conns[id(conn)] = conn

    def alive(self) -> None:
        self.last = time.monotonic()

    def closed(self, conn) -> bool:
        """Forget `conn`; whether the watch closed it."""
        with self.lock:
            self.conns.pop(id(conn), None)
            if id(conn) in self.stalled:
                self.stalled.discard(id(conn))
                return True
            return False

    def _run(self) -> None:
        while not self.done.wait(0.25):
            with self.lock:
                silent = time.monotonic() - self.last
                if not self.conns or silent <= self.stall_s:
                    continue
                for key, conn in self.conns.items():
                    self.stalled.add(key)
                    try:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except (OSError, AttributeError):
                        pass
                self.fired_s, self.stall_s = self.stall_s, self.stall_s * 2
                self.last = time.monotonic()

    def close(self) -> None:
        self.done.set()
