"""A failed gRPC call must not keep the client's connection open through the error it raised.

A grpc.aio call that is still alive keeps its HTTP/2 connection open after its channel was
closed. The error a failed unary call raises is what callers keep (a retry loop's last
error, a log record, a future's exception): it must carry the status, not the call, so that
closing the client closes the connection even while the error is held. Seen against a real
Liftbridge that was starting: ``connect`` failed with UNAVAILABLE, and its connection stayed
open until the garbage collector broke the cycle the traceback made.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest

import streamwire.liftbridge as lb
from streamwire import ConnectError, StreamwireError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from tests.sockets import HAS_PROC, wait_connections_to
from tests.unit.liftbridge.fake_api import dead_port, start_api

pytestmark = pytest.mark.skipif(not HAS_PROC, reason="counts sockets through /proc")


class StartingServer:
    """FetchMetadata fails with ``code`` (a Liftbridge that is not ready yet)."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self.code = code
        self.calls = 0

    async def metadata(self, request: pb.FetchMetadataRequest, context: Any) -> Any:
        self.calls += 1
        await context.abort(self.code, "not ready (scripted)")


@pytest.fixture
async def server() -> AsyncIterator[tuple[StartingServer, int]]:
    api = grpc.aio.server()
    starting = StartingServer(grpc.StatusCode.UNAVAILABLE)
    port = await start_api(api, {"FetchMetadata": starting.metadata})
    try:
        yield starting, port
    finally:
        await api.stop(None)


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL])
async def test_a_failed_connect_leaves_no_connection_while_its_error_is_held(
    server: tuple[StartingServer, int], code: grpc.StatusCode
) -> None:
    starting, port = server
    starting.code = code
    url = f"liftbridge://127.0.0.1:{port}?nats=nats://127.0.0.1:{dead_port()}"
    held: list[BaseException] = []
    try:
        await lb.connect(url, timeout=5)
    except StreamwireError as exc:
        held.append(exc)
    assert starting.calls >= 1, "the server was not asked"
    assert held, "connect did not fail"
    if code == grpc.StatusCode.UNAVAILABLE:
        assert isinstance(held[0], ConnectError)
    chain = [held[0]]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    statuses = [e for e in chain if isinstance(e, grpc.aio.AioRpcError)]
    assert [s.code() for s in statuses] == [code]  # the status stays readable
    assert await wait_connections_to(port) == [], "the connection outlived the failed connect"
