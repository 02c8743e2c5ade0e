"""streamwire ↔ gufo-liftbridge 0.2.0 (BSD-3, gRPC only), both directions, through the real
Liftbridge v1.9.0 from integration/brokers.sh.

gufo publishes over gRPC (``Publish``/``PublishAsync``) and subscribes over gRPC; streamwire
publishes envelopes over NATS. So these tests cross both publish paths and both readers.

What gufo does differently (observed, and read in its source):

* ``publish()`` sends a unary Publish without a deadline, so the server does not wait for the
  ack (liftbridge issue #347); the tests read the messages back instead of trusting it.
* ``set_cursor(offset)`` stores ``offset + 1`` (the next offset to read) and ``get_cursor``
  returns the raw value; streamwire stores the offset of the last processed message (as
  go-liftbridge) and resumes at ``cursor + 1``. Sharing a cursor id between the two
  therefore skips one message; the raw server value is the same on both sides.
* ``publish_bulk`` is typed as yielding ``Ack`` but yields ``PublishResponse`` messages.
* It hands out the server-added ``subject``/``reply`` headers; streamwire drops them unless
  ``server_headers=True``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from gufo.liftbridge.client import LiftbridgeClient
from gufo.liftbridge.types import AckPolicy as GufoAckPolicy
from gufo.liftbridge.types import Message as GufoMessage
from gufo.liftbridge.types import StartPosition

import streamwire.liftbridge as lb
from streamwire import Message
from streamwire.liftbridge.protocol.messages import partition_for_key
from tests.brokers import BrokerInfo, require

pytestmark = [pytest.mark.interop, pytest.mark.liftbridge]


@pytest.fixture
def broker() -> BrokerInfo:
    return require("liftbridge")


@pytest.fixture
async def client(broker: BrokerInfo) -> AsyncIterator[lb.Client]:
    nats_url = broker.extra.get("NATS_URL", f"nats://{broker.host}:4222")
    c = await lb.connect(f"liftbridge://{broker.host}:{broker.port}?nats={nats_url}", timeout=10)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def gufo(broker: BrokerInfo) -> AsyncIterator[LiftbridgeClient]:
    async with LiftbridgeClient([f"{broker.host}:{broker.port}"]) as g:
        yield g


@pytest.fixture
async def stream(client: lb.Client) -> AsyncIterator[str]:
    name = f"sw-gufo-{uuid.uuid4().hex[:12]}"
    await client.create_stream(name, partitions=2)
    try:
        yield name
    finally:
        await client.delete_stream(name, missing_ok=True)


async def read_ours(client: lb.Client, stream: str, partition: int, count: int) -> list[Message]:
    out: list[Message] = []
    async with client.consumer(stream, partition=partition) as consumer, asyncio.timeout(10):
        while len(out) < count:
            out.extend(await consumer.next_batch(count - len(out), timeout=10))
    return out


async def read_gufo(
    gufo: LiftbridgeClient, stream: str, partition: int, count: int
) -> list[GufoMessage]:
    out: list[GufoMessage] = []
    async with asyncio.timeout(10):
        async for msg in gufo.subscribe(
            stream, partition=partition, start_position=StartPosition.EARLIEST
        ):
            out.append(msg)
            if len(out) == count:
                break
    return out


async def test_gufo_publishes_we_read(
    client: lb.Client, gufo: LiftbridgeClient, stream: str
) -> None:
    sent = [(f"value-{i}".encode(), f"key-{i}".encode(), i % 2) for i in range(6)]
    for value, key, partition in sent:
        await gufo.publish(
            value,
            stream=stream,
            key=key,
            partition=partition,
            headers={"from": b"gufo", "i": value[-1:]},
            ack_policy=GufoAckPolicy.LEADER,
        )
    for partition in (0, 1):
        expected = [(v, k) for v, k, p in sent if p == partition]
        got = await read_ours(client, stream, partition, len(expected))
        assert [(m.value, m.key) for m in got] == expected
        assert [m.offset for m in got] == list(range(len(expected)))
        for m in got:
            assert m.headers["from"].as_bytes() == b"gufo"
            assert m.headers["i"].as_bytes() == (m.value or b"")[-1:]
            assert set(m.headers) == {"from", "i"}
            assert (m.stream, m.partition) == (stream, partition)


async def test_gufo_bulk_acks_match_our_offsets(
    client: lb.Client, gufo: LiftbridgeClient, stream: str
) -> None:
    requests = [
        gufo.get_publish_request(f"bulk-{i}".encode(), stream=stream, partition=0) for i in range(5)
    ]
    # typed as AsyncIterable[Ack], but gufo 0.2.0 yields the PublishResponse messages
    responses: list[Any] = [r async for r in gufo.publish_bulk(requests)]
    assert sorted(r.ack.offset for r in responses) == list(range(5))
    got = await read_ours(client, stream, 0, 5)
    assert [m.value for m in got] == [f"bulk-{i}".encode() for i in range(5)]


async def test_we_publish_over_nats_gufo_reads(
    client: lb.Client, gufo: LiftbridgeClient, stream: str
) -> None:
    keys = [f"k{i}".encode() for i in range(8)]
    async with client.producer(stream) as producer:
        confs = [
            await producer.send_and_wait(
                b"v-" + key, key=key, headers={"origin": "streamwire", "n": key}
            )
            for key in keys
        ]
    assert [c.partition for c in confs] == [partition_for_key(k, 2) for k in keys]
    for partition in (0, 1):
        expected = [k for k in keys if partition_for_key(k, 2) == partition]
        got = await read_gufo(gufo, stream, partition, len(expected))
        assert [m.key for m in got] == expected
        assert [m.value for m in got] == [b"v-" + k for k in expected]
        assert [m.offset for m in got] == [c.offset for c in confs if c.partition == partition]
        for m in got:
            assert m.headers["origin"] == b"streamwire"
            assert m.headers["n"] == m.key
            assert m.headers["subject"] == (stream if partition == 0 else f"{stream}.1").encode()
            assert m.partition == partition


async def test_metadata_agrees(client: lb.Client, gufo: LiftbridgeClient, stream: str) -> None:
    theirs = await gufo.get_metadata()
    ours = await client.fetch_metadata()
    assert stream in ours.streams
    (their_stream,) = [s for s in theirs.metadata if s.name == stream]
    assert their_stream.subject == ours.streams[stream].subject
    assert sorted(their_stream.partitions) == sorted(ours.streams[stream].partitions)
    assert {b.id for b in theirs.brokers} == set(ours.brokers)


async def test_cursor_values_are_shared(
    client: lb.Client, gufo: LiftbridgeClient, stream: str
) -> None:
    cursor = f"cur-{uuid.uuid4().hex[:8]}"
    await gufo.set_cursor(stream, 0, cursor, 5)
    assert await client.fetch_cursor(stream, 0, cursor) == 6  # gufo stores offset + 1
    await client.set_cursor(stream, 0, cursor, 9)
    assert await gufo.get_cursor(stream, 0, cursor) == 9
