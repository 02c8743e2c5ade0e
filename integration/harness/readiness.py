"""Is a broker ready: TCP probes, log markers and the poll loop around them."""

from __future__ import annotations

import enum
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Appears", "Outcome", "file_contains", "port_open", "rabbit_started", "wait_until"]

PROBE_TIMEOUT = 2.0


def port_open(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> bool:
    """True when a TCP connection to ``host:port`` succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def file_contains(path: Path, needle: str, *, start: int = 0) -> bool:
    """True when ``path`` exists and holds ``needle`` (a log line the broker writes once) past
    byte ``start`` (what an earlier run of the broker wrote before it is not looked at)."""
    try:
        with path.open("rb") as f:
            f.seek(start)
            return any(needle in line.decode("utf-8", "replace") for line in f)
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


def rabbit_started(
    unavailable: Callable[..., bool],
    target: str,
    label: str,
    *,
    host: str,
    stream_port: int,
    beam_running: Callable[[], bool],
    ctl: Callable[..., Any],
    timeout: float,
    log: Path,
    node_log: Path,
) -> bool:
    """Wait for a RabbitMQ node that was just started (or is starting): its stream port, then
    ``rabbitmqctl await_startup``. Records ``target`` as unavailable (``unavailable(target,
    reason, *logs)``) and returns False when it does not come up."""
    outcome = wait_until(lambda: port_open(host, stream_port), Appears(beam_running), timeout)
    if outcome is not Outcome.READY:
        why = (
            "the Erlang VM exited during startup"
            if outcome is Outcome.DIED
            else f"did not open {host}:{stream_port} within {timeout:g} s"
        )
        return unavailable(target, f"{label} {why}", log, node_log)
    if ctl("await_startup", "--timeout", "60", log=log).returncode != 0:
        return unavailable(target, "rabbitmqctl await_startup failed", log, node_log)
    return True
