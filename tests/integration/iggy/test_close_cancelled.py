"""A client whose close() is cancelled right after it starts (a producer with 1 000
messages pending), then closed again, leaves no connection to the server: counted among
this process's TCP sockets, on every lane."""

from __future__ import annotations

import asyncio

import pytest

import streamwire.iggy as iggy
from streamwire.errors import ClosedError
from tests.iggy_lanes import Lane
from tests.lifecycle import close_cancelled_then_closed
from tests.sockets import HAS_PROC, tcp_connections_to, wait_connections_to

pytestmark = pytest.mark.skipif(not HAS_PROC, reason="counts sockets through /proc")


async def test_close_cancelled(server: Lane) -> None:
    before = len(tcp_connections_to(server.port))
    client = await iggy.connect(server.url, timeout=10, request_timeout=10, reconnect=None)
    try:
        await client.create_stream("close-cancelled/t", partitions=1, exist_ok=True)
        producer = await client.producer("close-cancelled/t")
        consumer = await client.consumer("close-cancelled/t", name="c")
        futures = await producer.send_batch([b"m%d" % i for i in range(1000)])
        assert len(tcp_connections_to(server.port)) - before == 3
        await close_cancelled_then_closed(client)
    finally:
        async with asyncio.timeout(30):
            await client.close()
    left = await wait_connections_to(server.port)
    assert len(left) <= before, left
    # each message was confirmed before the cancellation, or failed with the close
    assert all(f.exception() is None or isinstance(f.exception(), ClosedError) for f in futures)
    with pytest.raises(ClosedError):
        await producer.send(b"late")
    with pytest.raises(ClosedError):
        await consumer.next(timeout=0)
