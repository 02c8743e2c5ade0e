"""The RabbitMQ Streams client against the scripted broker (no server): handshake, stream
management, error codes mapped to typed errors, heartbeats, and the end of a connection."""

from __future__ import annotations

import asyncio

import pytest

import streamwire.rabbitmq as rmq
from streamwire.errors import AuthenticationError, ClosedError, ConnectionClosed
from streamwire.rabbitmq.protocol import frames as f
from streamwire.rabbitmq.protocol.constants import CommandKey, ResponseCode
from streamwire.rabbitmq.protocol.errors import (
    AccessRefused,
    AuthenticationFailure,
    PreconditionFailed,
    StreamAlreadyExists,
    StreamDoesNotExist,
    VirtualHostAccessFailure,
)
from tests.rabbitmq_double import RabbitMQDouble

K = CommandKey


async def test_handshake_plain_tune_open_and_command_versions(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    auth = broker.frames(f.SaslAuthenticateRequest)
    assert [(a.mechanism, a.data) for a in auth] == [("PLAIN", b"\0guest\0guest")]
    assert broker.frames(f.TuneResponse) == [f.TuneResponse(1_048_576, 60)]
    assert [o.vhost for o in broker.frames(f.OpenRequest)] == ["/"]
    assert client.server_version == (4, 0, 5)
    assert client.supports(K.PUBLISH, 2)
    assert client.supports(K.CREATE_SUPER_STREAM)
    assert not client.supports(K.RESOLVE_OFFSET_SPEC)


async def test_wrong_password_is_an_authentication_failure(broker: RabbitMQDouble) -> None:
    with pytest.raises(AuthenticationFailure) as info:
        async with asyncio.timeout(5):
            await rmq.connect(broker.url, password="nope", timeout=5.0, reconnect=None)
    assert isinstance(info.value, AuthenticationError)


async def test_unknown_vhost_is_refused(broker: RabbitMQDouble) -> None:
    with pytest.raises(VirtualHostAccessFailure):
        async with asyncio.timeout(5):
            await rmq.connect(broker.url, vhost="other", timeout=5.0, reconnect=None)


async def test_create_and_delete_stream(broker: RabbitMQDouble, client: rmq.Client) -> None:
    await client.create_stream("orders", max_age="24h", max_length_bytes=1000)
    assert broker.state.streams["orders"].arguments == {
        "max-age": "24h",
        "max-length-bytes": "1000",
    }
    assert await client.stream_exists("orders")
    info = await client.stream_info("orders")
    assert info.leader == (broker.host, broker.port)
    await client.delete_stream("orders")
    assert "orders" not in broker.state.streams
    assert not await client.stream_exists("orders")


async def test_exist_ok_and_missing_ok(broker: RabbitMQDouble, client: rmq.Client) -> None:
    await client.create_stream("s")
    with pytest.raises(StreamAlreadyExists):
        await client.create_stream("s")
    await client.create_stream("s", exist_ok=True)
    with pytest.raises(PreconditionFailed):  # same name, other arguments
        await client.create_stream("s", exist_ok=True, max_age="1h")
    await client.delete_stream("s")
    with pytest.raises(StreamDoesNotExist):
        await client.delete_stream("s")
    await client.delete_stream("s", missing_ok=True)
    assert broker.state.streams == {}


async def test_server_error_codes_become_typed_errors(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    broker.refuse[K.CREATE] = ResponseCode.ACCESS_REFUSED
    with pytest.raises(AccessRefused) as info:
        await client.create_stream("s")
    assert info.value.code == ResponseCode.ACCESS_REFUSED
    with pytest.raises(StreamDoesNotExist):
        await client.stream_info("missing")
    with pytest.raises(StreamDoesNotExist):
        await client.partitions("missing")
    broker.refuse[K.STREAM_STATS] = 0x7777  # a code streamwire does not know
    with pytest.raises(rmq.StreamsServerError) as unknown:
        await client.stream_stats("s")
    assert unknown.value.code == 0x7777
    # the connection stays usable after error responses
    del broker.refuse[K.CREATE]
    await client.create_stream("s")


async def test_stream_stats(broker: RabbitMQDouble, client: rmq.Client) -> None:
    await client.create_stream("s")
    assert await client.stream_stats("s") == {
        "first_chunk_id": -1,
        "committed_chunk_id": -1,
        "last_chunk_id": -1,
    }


async def test_heartbeats_flow_both_ways(broker: RabbitMQDouble) -> None:
    settings = rmq.ConnectionSettings(heartbeat=1)
    client = await rmq.connect(broker.url, settings=settings, timeout=5.0, reconnect=None)
    try:
        assert broker.frames(f.TuneResponse) == [f.TuneResponse(1_048_576, 1)]
        # the client writes a heartbeat when it has been write-idle for an interval
        await broker.until(lambda: broker.sessions[0].heartbeats_received >= 2)
        # and the broker's heartbeats keep the connection alive past two intervals
        conn = await client._locator_connection()
        assert conn.is_open
        await client.create_stream("still-alive")
    finally:
        await client.close()


async def test_a_silent_broker_is_detected_by_heartbeat(broker: RabbitMQDouble) -> None:
    settings = rmq.ConnectionSettings(heartbeat=1)
    client = await rmq.connect(broker.url, settings=settings, timeout=5.0, reconnect=None)
    try:
        conn = await client._locator_connection()
        broker.sessions[0].silent = True
        async with asyncio.timeout(10):
            await conn._closed.wait()
        assert isinstance(conn.error, ConnectionClosed)
        assert "no heartbeat" in str(conn.error)
    finally:
        await client.close()


async def test_broker_close_fails_the_connection_with_the_reason(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    conn = await client._locator_connection()
    broker.sessions[0].close_with(ResponseCode.INTERNAL_ERROR, "shutting down")
    async with asyncio.timeout(5):
        await conn._closed.wait()
    assert isinstance(conn.error, ConnectionClosed)
    assert "shutting down" in str(conn.error)
    assert isinstance(conn.error.__cause__, rmq.StreamsServerError)
    assert conn.error.__cause__.code == ResponseCode.INTERNAL_ERROR


async def test_the_broker_s_close_is_answered(broker: RabbitMQDouble, client: rmq.Client) -> None:
    conn = await client._locator_connection()
    broker.sessions[0].close_with(ResponseCode.INTERNAL_ERROR, "shutting down")
    async with asyncio.timeout(5):
        await conn._closed.wait()
    await broker.until(
        lambda: [r for r in broker.frames(f.SimpleResponse) if r.command == K.CLOSE], timeout=1.0
    )


async def test_a_connection_dropped_by_the_peer_fails_pending_requests(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    conn = await client._locator_connection()
    session = broker.sessions[0]
    session.silent = True  # the request goes unanswered...
    pending = asyncio.create_task(client.create_stream("s"))
    await broker.until(lambda: broker.frames(f.CreateRequest))
    session.hang_up()  # ...then the line drops
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(5):
            await pending
    assert not conn.is_open
    # the client dials a new locator connection for the next request
    await client.create_stream("s", exist_ok=True)
    assert len(broker.sessions) == 2


async def test_close_sends_close_and_is_idempotent(
    broker: RabbitMQDouble, client: rmq.Client
) -> None:
    conn = await client._locator_connection()
    await client.close()
    await client.close()
    closes = broker.frames(f.CloseRequest)
    assert [(c.code, c.reason) for c in closes] == [(ResponseCode.OK, "OK")]
    assert not conn.is_open
    with pytest.raises(ClosedError):
        await client.create_stream("s")
    with pytest.raises(ClosedError):
        client.producer("s")
