"""Where the Iggy scenarios run: three lanes with one test body each.

* ``double``: the conformance double, answering as docs/protocol/iggy.md describes;
* ``double-server-habits``: the double with what a real sharded server was seen doing
  (internal operations on CreateTopic/CreatePartitions, a server-chosen client id, replies
  to pipelined requests out of order);
* ``server``: the real Iggy server the harness started (``IGGY_SERVER_BIN``, or Docker),
  skipped with the harness's recorded reason when there is none.

A real server keeps its state across tests, so lane tests name their streams uniquely
(:func:`unique`) and delete them afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import pytest

from tests.brokers import brokers_dir, require
from tests.iggy_double import Habits, IggyDouble

__all__ = ("LANES", "Lane", "lane", "real_server_reason", "unique")

LANES: Final = ("double", "double-server-habits", "server")


@dataclass(frozen=True, slots=True)
class Lane:
    name: str
    url: str
    host: str
    port: int
    double: IggyDouble | None
    """The double behind the lane (``None`` on a real server)."""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def is_real(self) -> bool:
        return self.double is None


def real_server_reason() -> str:
    """Why there is no real Iggy server (the harness's words), for skips."""
    unavailable = brokers_dir() / "iggy.unavailable"
    if unavailable.is_file():
        lines = unavailable.read_text(encoding="utf-8").splitlines()
        return f"no real Iggy server: {lines[0] if lines else 'unavailable'}"
    return "no real Iggy server: run integration/brokers.sh up iggy with IGGY_SERVER_BIN set"


@asynccontextmanager
async def lane(name: str) -> AsyncIterator[Lane]:
    """The Iggy server of lane ``name`` (see the module notes); skips the real lane when the
    harness has no server."""
    if name == "server":
        if not (brokers_dir() / "iggy.env").is_file():
            pytest.skip(real_server_reason())
        info = require("iggy")
        yield Lane(name, info.url, info.host, info.port, None)
        return
    habits: Habits = "server" if name == "double-server-habits" else "notes"
    async with IggyDouble(habits=habits) as double:
        yield Lane(name, double.url, double.host, double.port, double)


def unique(prefix: str = "sw") -> str:
    """A stream name no other test (or earlier run on a real server) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
