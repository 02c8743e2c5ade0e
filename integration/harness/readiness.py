"""Is a broker ready: TCP probes, log markers and the poll loop around them."""

from __future__ import annotations

import enum
import socket
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["Appears", "Outcome", "file_contains", "port_open", "wait_until"]

PROBE_TIMEOUT = 2.0


def port_open(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """True when a TCP connection to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def file_contains(path: Path, needle: str) -> bool:
    """True when ``path`` exists and holds ``needle`` (a log line the broker writes once)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return any(needle in line for line in f)
    except OSError:
        return False


class Outcome(enum.Enum):
    READY = "ready"
    TIMEOUT = "timeout"
    #: the process exited before it was ready
    DIED = "died"


def wait_until(
    ready: Callable[[], bool],
    alive: Callable[[], bool],
    timeout: float,
    *,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Polls ``ready`` every ``interval`` seconds until it is true (READY), ``alive`` turns
    false (DIED: no point in waiting longer) or ``timeout`` seconds have passed (TIMEOUT).
    ``ready`` is asked first, so a broker that is ready and then exits counts as ready."""
    deadline = clock() + timeout
    while True:
        if ready():
            return Outcome.READY
        if not alive():
            return Outcome.DIED
        if clock() >= deadline:
            return Outcome.TIMEOUT
        sleep(interval)


class Appears:
    """``alive`` for :func:`wait_until` when a launcher returns before the process exists
    (``rabbitmq-server -detached``): alive while ``running()``, and before it was first seen
    for up to ``within`` seconds; once seen and then gone, it died."""

    def __init__(
        self,
        running: Callable[[], bool],
        within: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._running = running
        self._clock = clock
        self._deadline = clock() + within
        self.seen = False

    def __call__(self) -> bool:
        if self._running():
            self.seen = True
            return True
        return not self.seen and self._clock() < self._deadline
