"""Where a cursor lives: the ``__cursors`` stream a new cluster creates shortly after it starts.

An in-process grpc.aio server (FetchMetadata and FetchCursor only) plays a server that learns
of ``__cursors`` late, as a follower of a freshly started v1.9.0 cluster did in CI: the client
asks again before it calls cursors disabled, and still says so (a ``ConfigurationError``) when
the stream never appears.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest

import streamwire.liftbridge as lb
from streamwire.errors import ConfigurationError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from tests.unit.liftbridge.fake_api import dead_port, one_node_metadata, start_api

CURSORS = "__cursors"


class LateCursorsServer:
    """Knows ``__cursors`` from metadata lookup number ``cursors_from`` on (never if None)."""

    def __init__(self, cursors_from: int | None) -> None:
        self.cursors_from = cursors_from
        self.cursor_lookups = 0
        self.fetched: list[pb.FetchCursorRequest] = []
        self.server = grpc.aio.server()
        self.port = 0

    def metadata(self, request: pb.FetchMetadataRequest, context: Any) -> Any:
        names = list(request.streams)
        if CURSORS in names:
            self.cursor_lookups += 1
            if self.cursors_from is None or self.cursor_lookups < self.cursors_from:
                names.remove(CURSORS)
        return one_node_metadata(self.port, names)

    def fetch_cursor(self, request: pb.FetchCursorRequest, context: Any) -> Any:
        self.fetched.append(request)
        return pb.FetchCursorResponse(offset=41)

    async def start(self) -> None:
        self.port = await start_api(
            self.server, {"FetchMetadata": self.metadata, "FetchCursor": self.fetch_cursor}
        )


async def connected(server: LateCursorsServer) -> lb.Client:
    url = f"liftbridge://127.0.0.1:{server.port}?nats=nats://127.0.0.1:{dead_port()}"
    return await lb.connect(url, timeout=5, require_nats=False)


@pytest.fixture
async def late() -> AsyncIterator[LateCursorsServer]:
    server = LateCursorsServer(cursors_from=3)
    await server.start()
    try:
        yield server
    finally:
        await server.server.stop(None)


@pytest.fixture
async def never() -> AsyncIterator[LateCursorsServer]:
    server = LateCursorsServer(cursors_from=None)
    await server.start()
    try:
        yield server
    finally:
        await server.server.stop(None)


async def test_a_late_cursors_stream_is_waited_for(late: LateCursorsServer) -> None:
    client = await connected(late)
    try:
        assert await client.fetch_cursor("orders", 0, "c") == 41
        assert late.cursor_lookups == 3
        assert [(r.cursorId, r.stream, r.partition) for r in late.fetched] == [("c", "orders", 0)]
    finally:
        await client.close()


async def test_cursors_that_never_appear_are_reported_disabled(never: LateCursorsServer) -> None:
    client = await connected(never)
    try:
        with pytest.raises(ConfigurationError, match="cursors are disabled"):
            await client.fetch_cursor("orders", 0, "c")
        assert never.cursor_lookups > 1
        assert never.fetched == []
    finally:
        await client.close()
