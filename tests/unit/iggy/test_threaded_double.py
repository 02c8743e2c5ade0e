"""The threaded runner of the conformance double: clients on other loops (and, in the
Spark tests, other processes) reach it over loopback TCP; stopping it closes the port."""

from __future__ import annotations

import asyncio

import pytest

import streamwire
from tests.iggy_double import ThreadedIggyDouble


async def create_and_send(url: str) -> int | None:
    async with streamwire.connect(url, timeout=5.0) as client:
        await client.create_stream("s/t", partitions=1)
        async with client.producer("s/t") as producer:
            confirmation = await producer.send_and_wait(streamwire.Message(b"x"))
    return confirmation.offset


def test_serves_clients_of_another_loop_and_stops() -> None:
    with ThreadedIggyDouble() as server:
        assert server.host == "127.0.0.1"
        assert server.port > 0
        assert server.url == f"iggy://iggy:iggy@127.0.0.1:{server.port}"
        # this thread's own loop, not the double's
        assert asyncio.run(create_and_send(server.url)) == 0
        stored = server.call(lambda d: d.state.streams[0].topics[0].partitions[0].next_offset)
        assert stored == 1
        url = server.url
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url

    async def connect() -> None:
        client = await streamwire.connect(url, timeout=2.0, reconnect=None)
        await client.close()

    with pytest.raises(streamwire.TransportError):
        asyncio.run(connect())
    server.stop()  # idempotent
