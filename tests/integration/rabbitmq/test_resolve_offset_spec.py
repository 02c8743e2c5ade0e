"""ResolveOffsetSpec (key 0x1F, new in RabbitMQ 4.3) on a real broker, through the SDK's frame
codec and connection.

Observed on 4.3.6 (docs/rabbitmq.md, "RabbitMQ 4.3"): every answer carries offset type 4
(an absolute offset), also the error answer for a missing stream (code 2, offset 0); on an
empty stream first, last and next all resolve to 0. Brokers older than 4.3 do not announce the
command in ExchangeCommandVersions; for them the test checks just that.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

import streamwire.rabbitmq as rmq
from streamwire import Offset
from streamwire.errors import UnsupportedByBroker
from streamwire.rabbitmq.protocol.constants import CommandKey, OffsetType
from streamwire.rabbitmq.protocol.errors import StreamDoesNotExist
from streamwire.rabbitmq.protocol.frames import (
    ResolveOffsetSpecRequest,
    ResolveOffsetSpecResponse,
)
from tests.brokers import BrokerInfo

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq]


async def resolve(
    client: rmq.Client, stream: str, offset_type: OffsetType, value: int | None = None
) -> tuple[int, int | None]:
    conn = await client._locator_connection()
    response = await conn.request(
        lambda corr: ResolveOffsetSpecRequest(corr, stream, offset_type, value),
        ResolveOffsetSpecResponse,
    )
    return response.offset_type, response.offset


def announces_resolve(broker: BrokerInfo, client: rmq.Client) -> bool:
    announced = client.supports(CommandKey.RESOLVE_OFFSET_SPEC)
    assert announced == (client.server_version >= (4, 3)), (broker.version, announced)
    return announced


async def test_offset_specs_resolve_to_absolute_offsets(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    if not announces_resolve(broker, client):
        pytest.skip(f"RabbitMQ {broker.version} predates ResolveOffsetSpec (4.3)")
    before = int(time.time() * 1000) - 60_000
    for spec in (OffsetType.FIRST, OffsetType.LAST, OffsetType.NEXT):
        assert await resolve(client, stream, spec) == (OffsetType.OFFSET, 0), spec
    async with client.producer(stream) as producer:
        for i in range(10):
            await (await producer.send(f"m{i}".encode()))
    assert await resolve(client, stream, OffsetType.FIRST) == (OffsetType.OFFSET, 0)
    assert await resolve(client, stream, OffsetType.NEXT) == (OffsetType.OFFSET, 10)
    kind, last = await resolve(client, stream, OffsetType.LAST)  # the last chunk's first offset
    assert kind == OffsetType.OFFSET
    assert last is not None
    assert 0 <= last <= 9
    assert await resolve(client, stream, OffsetType.OFFSET, 3) == (OffsetType.OFFSET, 3)
    assert await resolve(client, stream, OffsetType.TIMESTAMP, before) == (OffsetType.OFFSET, 0)
    later = int(time.time() * 1000) + 60_000
    assert await resolve(client, stream, OffsetType.TIMESTAMP, later) == (OffsetType.OFFSET, 10)


async def test_a_missing_stream_is_stream_does_not_exist(
    broker: BrokerInfo, client: rmq.Client
) -> None:
    if not announces_resolve(broker, client):
        pytest.skip(f"RabbitMQ {broker.version} predates ResolveOffsetSpec (4.3)")
    with pytest.raises(StreamDoesNotExist):
        await resolve(client, "sw-test-no-such-stream", OffsetType.FIRST)


async def test_the_public_call_resolves_every_kind_of_offset(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    if not client.supports(CommandKey.RESOLVE_OFFSET_SPEC):
        with pytest.raises(UnsupportedByBroker, match=r"has no ResolveOffsetSpec \(needs 4\.3\)"):
            await client.resolve_offset_spec(stream, "next")
        return
    assert await client.resolve_offset_spec(stream, "next") == 0
    async with client.producer(stream) as producer:
        await (await producer.send_many([f"m{i}".encode() for i in range(10)]))
    assert await client.resolve_offset_spec(stream, "first") == 0
    assert await client.resolve_offset_spec(stream, "next") == 10
    # an offset inside a chunk resolves to that chunk's first offset (where delivery starts)
    at_four = await client.resolve_offset_spec(stream, Offset.at(4))
    assert 0 <= at_four <= 4
    assert at_four == await client.resolve_offset_spec(stream, at_four)
    assert 0 <= await client.resolve_offset_spec(stream, "last") <= 9
    assert await client.resolve_offset_spec(stream, datetime.now(UTC) + timedelta(minutes=1)) == 10
    assert await client.resolve_offset_spec(stream, datetime.now(UTC) - timedelta(hours=1)) == 0
    with pytest.raises(StreamDoesNotExist):
        await client.resolve_offset_spec("sw-test-no-such-stream", "first")
