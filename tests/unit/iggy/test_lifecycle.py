"""Lifecycles that survive cancellation, on the Iggy conformance double: a cancelled
close() aborts what it did not close (no socket left), and a cancellation aimed at close()
always reaches its caller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import streamwire.iggy as iggy
from streamwire.errors import ClosedError
from streamwire.iggy._connection import Connection, Credentials
from tests.iggy_double import IggyDouble
from tests.lifecycle import cancel, close_cancelled_then_closed
from tests.proxy import wait_until
from tests.sockets import HAS_PROC, wait_connections_to


@pytest.fixture
async def double() -> AsyncIterator[IggyDouble]:
    async with IggyDouble() as server:
        yield server


@pytest.mark.skipif(not HAS_PROC, reason="counts sockets through /proc")
async def test_a_cancelled_client_close_leaves_no_connection(double: IggyDouble) -> None:
    client = await iggy.connect(double.url, timeout=5, request_timeout=30, reconnect=None)
    try:
        await client.create_stream("s/t", partitions=1)
        producer = await client.producer("s/t", linger=0.0)
        consumer = await client.consumer("s/t", name="c")
        double.silence(1000)  # the batch (and anything after it) goes unanswered
        futures = await producer.send_batch([b"m%d" % i for i in range(1000)])
        await wait_until(lambda: bool(double.dropped), 5, "the batch reached the server")
        assert len(await wait_connections_to(double.port, timeout=0)) == 3

        await close_cancelled_then_closed(client)  # the close's flush waits in the producer
    finally:
        async with asyncio.timeout(10):
            await client.close()
    assert await wait_connections_to(double.port) == []
    assert all(isinstance(fut.exception(), ClosedError) for fut in futures)
    with pytest.raises(ClosedError):
        await producer.send(b"late")
    with pytest.raises(ClosedError):
        await consumer.next(timeout=0)


async def test_a_cancellation_while_the_connection_stops_its_tasks_reaches_the_caller(
    double: IggyDouble,
) -> None:
    conn = await Connection.open(
        double.host, double.port, Credentials(username="iggy", password="iggy"), timeout=5
    )
    closing = asyncio.create_task(conn.close())
    # logged out: close() now waits for its tasks to end
    await wait_until(lambda: conn.error is not None, 5, "logged out", step=0)
    await cancel(closing)
    assert isinstance(conn.error, ClosedError)
    assert not conn.is_open


@pytest.mark.skipif(not HAS_PROC, reason="counts sockets through /proc")
async def test_a_close_cancelled_while_logging_out_drops_the_socket(double: IggyDouble) -> None:
    conn = await Connection.open(
        double.host, double.port, Credentials(username="iggy", password="iggy"), timeout=5
    )
    double.silence(1)  # the logout goes unanswered
    closing = asyncio.create_task(conn.close(timeout=30))
    await wait_until(lambda: bool(double.dropped), 5, "the logout reached the server")
    await cancel(closing)
    assert await wait_connections_to(double.port) == []
    async with asyncio.timeout(5):
        await conn.close()  # again: nothing left to do, and no error
