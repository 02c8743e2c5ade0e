"""Hooks for the ``observer`` option's tests: ``install`` returns an observer that appends
each event (with the pid of the process it ran in) to :data:`EVENTS` as a JSON line, so a
test reads what Spark's Python processes, the driver's source runner and the executors'
workers, reported; ``installs`` counts the calls of ``install`` in a process."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from streamwire.metrics import Destination

#: Where every observer ``install`` returns writes (one file for the test session's user).
EVENTS = Path(tempfile.gettempdir()) / f"streamwire-observer-{os.getuid()}.jsonl"
installs = 0


def events() -> list[dict[str, Any]]:
    """What was recorded so far, in order."""
    if not EVENTS.exists():
        return []
    return [json.loads(line) for line in EVENTS.read_text().splitlines() if line]


class Recorder:
    """A :class:`streamwire.metrics.Observer` and ``LagObserver`` writing to :data:`EVENTS`."""

    def _write(self, event: str, where: Destination, **fields: Any) -> None:
        line = {"event": event, "pid": os.getpid(), "stream": where.stream, **fields}
        with EVENTS.open("a") as out:
            out.write(json.dumps(line) + "\n")

    def send(self, where: Destination, count: int, nbytes: int) -> object:
        self._write("send", where, count=count)
        return None

    def settled(
        self, where: Destination, token: object, confirmed: int, failed: int, seconds: float
    ) -> None:
        self._write("settled", where, confirmed=confirmed, failed=failed)

    def received(self, where: Destination, count: int, nbytes: int, lag: int | None) -> None:
        self._write("received", where, count=count)

    def connection(self, where: Destination, event: str) -> None:
        self._write("connection", where, what=event)

    def partition_lag(
        self, where: Destination, partition: int, messages: int, nbytes: int | None
    ) -> None:
        self._write(
            "lag", where, system=where.system, partition=partition, messages=messages, nbytes=nbytes
        )


def install() -> Recorder:
    global installs
    installs += 1
    return Recorder()


not_callable = 3
