"""A client whose close() is cancelled right after it starts (a producer with 1 000
messages pending), then closed again, leaves no connection to the broker: counted among
this process's TCP sockets."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import ClosedError
from tests.brokers import BrokerInfo
from tests.lifecycle import close_cancelled_then_closed
from tests.sockets import HAS_PROC, tcp_connections_to, wait_connections_to

pytestmark = pytest.mark.skipif(not HAS_PROC, reason="counts sockets through /proc")


async def test_close_cancelled(broker: BrokerInfo) -> None:
    before = len(tcp_connections_to(broker.port))
    name = f"sw-test-{uuid.uuid4().hex[:12]}"
    client = await rmq.connect(broker.url, timeout=10, reconnect=None)
    try:
        await client.create_stream(name)
        producer = await client.producer(name)
        await client.consumer(name)
        futures = await producer.send_batch([b"m%d" % i for i in range(1000)])
        assert len(tcp_connections_to(broker.port)) - before >= 2
        await close_cancelled_then_closed(client)
    finally:
        async with asyncio.timeout(30):
            await client.close()
    left = await wait_connections_to(broker.port)
    assert len(left) <= before, left
    # each message was confirmed before the cancellation, or failed with the close
    assert all(f.exception() is None or isinstance(f.exception(), ClosedError) for f in futures)
    with pytest.raises(ClosedError):
        await producer.send(b"late")
    with pytest.raises(ClosedError):
        client.consumer(name)
    async with await rmq.connect(broker.url, timeout=10, reconnect=None) as admin:
        await admin.delete_stream(name, missing_ok=True)
