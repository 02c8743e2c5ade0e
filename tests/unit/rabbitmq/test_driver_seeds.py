"""A URL naming several RabbitMQ nodes: they are tried in turn, on connect and whenever the
locator connection is lost (against the scripted broker; the cluster test does it for real)."""

from __future__ import annotations

import asyncio
import socket

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import ConnectError
from tests.rabbitmq_double import RabbitMQDouble


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def url_of(*ports: int) -> str:
    nodes = ",".join(f"127.0.0.1:{port}" for port in ports)
    return f"rabbitmq-stream://guest:guest@{nodes}/"


async def test_the_first_node_that_answers_is_used(broker: RabbitMQDouble) -> None:
    dead = unused_port()
    async with asyncio.timeout(10):
        client = await rmq.connect(url_of(dead, broker.port), timeout=2.0, reconnect=None)
    try:
        assert (client.host, client.port) == ("127.0.0.1", broker.port)
        assert client.seeds[0] == ("127.0.0.1", broker.port)  # tried first from now on
        await client.create_stream("s")
        assert await client.stream_exists("s")
    finally:
        await client.close()


async def test_no_node_answering_names_every_failure() -> None:
    first, second = unused_port(), unused_port()
    with pytest.raises(ConnectError) as info:
        async with asyncio.timeout(10):
            await rmq.connect(url_of(first, second), timeout=2.0, reconnect=None)
    assert "no RabbitMQ node answered" in str(info.value)
    assert f"127.0.0.1:{first}" in str(info.value)
    assert f"127.0.0.1:{second}" in str(info.value)


async def test_a_lost_locator_moves_to_the_next_node() -> None:
    async with RabbitMQDouble() as one, RabbitMQDouble() as two:
        async with asyncio.timeout(10):
            client = await rmq.connect(url_of(one.port, two.port), timeout=2.0, reconnect=None)
        try:
            locator = client._locator
            assert locator is not None
            lost = asyncio.Event()
            locator.on_lost.append(lambda _exc: lost.set())
            await one.stop()  # the node the client is on goes away
            async with asyncio.timeout(10):
                await lost.wait()
                await client.create_stream("after")
            assert (client.host, client.port) == ("127.0.0.1", two.port)
            assert "after" in two.state.streams
        finally:
            await client.close()


async def test_host_and_port_replace_the_node_list(broker: RabbitMQDouble) -> None:
    async with asyncio.timeout(10):
        client = await rmq.connect(
            url_of(unused_port(), unused_port()),
            port=broker.port,
            host="127.0.0.1",
            timeout=2.0,
            reconnect=None,
        )
    try:
        assert client.seeds == (("127.0.0.1", broker.port),)
    finally:
        await client.close()
