"""The producer's ack handling against a scripted partition leader on a real nats-server.

Liftbridge cannot be made to send some acks on demand (TOO_LARGE needs a payload above
``replication.max.bytes``, which the default NATS max_payload already refuses; ENCRYPTION
needs a broken encryption setup; duplicates need two streams on one subject), so a small
Python leader built on the same codec answers instead: it decodes each envelope with
``decode_publish`` and replies on the message's ack inbox as the value tells it to. The
client's gRPC side is not used (stream metadata is stubbed).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg

import streamwire.liftbridge as lb
from streamwire.errors import ConfigurationError, ConnectionClosed, FlushTimeout, ProducerBufferFull
from streamwire.liftbridge._nats import flush_in_order
from streamwire.liftbridge.protocol.errors import UnknownAckError
from streamwire.liftbridge.protocol.messages import Ack, decode_publish, encode_ack
from streamwire.liftbridge.protocol.metadata import PartitionInfo, StreamInfo
from streamwire.transport.deadline import Deadline
from tests.brokers import require

pytestmark = [pytest.mark.integration, pytest.mark.nats]


class FakeLeader:
    """Acks what it receives on ``subject``; the message value picks the behaviour."""

    def __init__(self, nc: NatsClient, stream: str, subject: str) -> None:
        self.nc = nc
        self.stream = stream
        self.subject = subject
        self.offset = 0
        self.late: list[tuple[str, bytes]] = []
        self.received: list[tuple[str, bytes]] = []
        """(correlation id, value) of every envelope seen, for failure messages."""

    async def start(self) -> None:
        await self.nc.subscribe(self.subject, cb=self.on_message)
        await flush_in_order(self.nc, 10)

    def ack(self, cid: str, inbox: str, *, offset: int = 0, error: int = 0) -> bytes:
        return encode_ack(
            Ack(self.stream, self.subject, self.subject, offset, inbox, cid, 0, 1, 2, error)
        )

    async def on_message(self, msg: Msg) -> None:
        m = decode_publish(msg.data)
        inbox, cid, behaviour = m.ack_inbox, m.correlation_id, m.value
        self.received.append((cid, behaviour))
        if behaviour == b"silent":
            return
        if behaviour == b"late":
            self.late.append((inbox, self.ack(cid, inbox, offset=99)))
            return
        errors = {b"too-large": 3, b"encryption": 4, b"incorrect-offset": 2, b"unknown": 1}
        if behaviour in errors:
            await self.nc.publish(inbox, self.ack(cid, inbox, error=errors[behaviour]))
            return
        if behaviour == b"garbage-first":
            await self.nc.publish(inbox, b"\xb9\x0e\x43\xb4 garbage")
        offset, self.offset = self.offset, self.offset + 1
        await self.nc.publish(inbox, self.ack(cid, inbox, offset=offset))
        if behaviour == b"twice":
            await self.nc.publish(inbox, self.ack(cid, inbox, offset=offset + 1000))

    async def send_late_acks(self) -> None:
        for inbox, data in self.late:
            await self.nc.publish(inbox, data)
        await flush_in_order(self.nc, 10)


@contextlib.asynccontextmanager
async def explained(client: lb.Client, leader: FakeLeader) -> AsyncIterator[None]:
    """An unexpected AckTimeout becomes a failure that says what each side saw."""
    try:
        yield
    except lb.AckTimeout as exc:
        raise AssertionError(
            f"{exc}; the leader saw {leader.received}, the client {client.stats}"
        ) from exc


@pytest.fixture
async def setup(
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[lb.Client, FakeLeader, str]]:
    info = require("nats")
    stream = f"fake-{uuid.uuid4().hex[:12]}"
    client = lb.Client("127.0.0.1", 1, nats_servers=[info.url])
    await client._open_nats(Deadline(10))

    async def stream_info(name: str, *, timeout: float | None = None) -> StreamInfo:
        return StreamInfo(name, stream, {0: PartitionInfo(name, 0, "fake")})

    monkeypatch.setattr(client, "stream_info", stream_info)
    nc = await nats.connect(info.url)
    leader = FakeLeader(nc, stream, stream)
    await leader.start()
    try:
        yield client, leader, stream
    finally:
        await client.close()
        await nc.close()


async def test_acks_resolve_with_offsets(setup: tuple[lb.Client, FakeLeader, str]) -> None:
    client, leader, stream = setup
    async with client.producer(stream) as producer, explained(client, leader):
        confs = [await producer.send_and_wait(b"ok") for _ in range(3)]
    assert [(c.offset, c.partition, c.stream) for c in confs] == [
        (0, 0, stream),
        (1, 0, stream),
        (2, 0, stream),
    ]


@pytest.mark.parametrize(
    ("value", "error", "code"),
    [
        (b"too-large", lb.TooLarge, 3),
        (b"encryption", lb.EncryptionFailed, 4),
        (b"incorrect-offset", lb.IncorrectOffset, 2),
        (b"unknown", UnknownAckError, 1),
    ],
)
async def test_error_acks_are_typed(
    setup: tuple[lb.Client, FakeLeader, str], value: bytes, error: type[lb.AckError], code: int
) -> None:
    client, leader, stream = setup
    async with client.producer(stream) as producer, explained(client, leader):
        with pytest.raises(error) as info:
            await producer.send_and_wait(value)
        assert info.value.code == code
        assert stream in str(info.value)
        assert (await producer.send_and_wait(b"ok")).offset == 0


async def test_duplicate_garbage_and_late_acks_are_ignored(
    setup: tuple[lb.Client, FakeLeader, str],
) -> None:
    client, leader, stream = setup
    async with client.producer(stream, ack_timeout=0.3) as producer:
        assert (await producer.send_and_wait(b"twice")).offset == 0
        assert (await producer.send_and_wait(b"garbage-first")).offset == 1
        with pytest.raises(lb.AckTimeout):
            await producer.send_and_wait(b"late")
        await leader.send_late_acks()
        assert (await producer.send_and_wait(b"ok")).offset == 2
    stats = client.stats.acks
    assert stats.unmatched == 2  # the duplicate and the late ack
    assert stats.invalid == 1
    assert stats.timeouts == 1


async def test_max_in_flight_blocks_then_raises(setup: tuple[lb.Client, FakeLeader, str]) -> None:
    client, _, stream = setup
    producer = await client.producer(stream, max_in_flight=2, ack_timeout=5, max_block=0.1)
    waiting = [await producer.send(b"silent"), await producer.send(b"silent")]
    with pytest.raises(ProducerBufferFull):
        await producer.send(b"ok")
    assert producer.pending == 2
    await producer.close(flush=False)
    await client.close()
    for future in waiting:
        with pytest.raises(ConnectionClosed):
            await future


async def test_flush_times_out_and_close_does_not_hang(
    setup: tuple[lb.Client, FakeLeader, str],
) -> None:
    client, _, stream = setup
    producer = await client.producer(stream, ack_timeout=None)
    pending = await producer.send(b"silent")
    with pytest.raises(FlushTimeout):
        await producer.flush(timeout=0.1)
    await asyncio.wait_for(producer.close(timeout=0.1), 5)
    assert not pending.done()  # the message keeps waiting for its ack after close
    await client.close()
    with pytest.raises(ConnectionClosed):
        await pending


async def test_send_batch_windows_by_max_in_flight_and_keeps_order(
    setup: tuple[lb.Client, FakeLeader, str],
) -> None:
    client, leader, stream = setup
    async with client.producer(stream, max_in_flight=7) as producer, explained(client, leader):
        futures = await producer.send_batch([b"ok"] * 50)
        await producer.flush(timeout=10)
        assert [f.result().offset for f in futures] == list(range(50))
        assert producer.pending == 0
    assert [cid for cid, _ in leader.received] == [f"{i:x}" for i in range(1, 51)]


async def test_send_batch_with_a_bad_value_sends_nothing(
    setup: tuple[lb.Client, FakeLeader, str],
) -> None:
    client, leader, stream = setup
    async with client.producer(stream) as producer, explained(client, leader):
        with pytest.raises(ConfigurationError):
            await producer.send_batch([b"ok", b"ok", "not bytes"])  # type: ignore[list-item]
        assert producer.pending == 0
        assert (await producer.send_and_wait(b"ok")).offset == 0  # the first thing sent
    assert [value for _, value in leader.received] == [b"ok"]


async def test_send_batch_acks_each_message_of_its_run(
    setup: tuple[lb.Client, FakeLeader, str],
) -> None:
    """A batch to one partition is acked into one ledger: every message still gets its own
    outcome (offset, error ack, timeout; duplicates and late acks ignored), flush reports the
    first failure and the producer's counters and stats settle."""
    client, leader, stream = setup
    values = [b"ok", b"incorrect-offset", b"twice", b"silent", b"late", b"ok"]
    async with client.producer(stream, ack_timeout=0.5) as producer:
        futures = await producer.send_batch(values)
        with pytest.raises(lb.IncorrectOffset):
            await producer.flush(timeout=10)
        assert producer.pending == 0
        await leader.send_late_acks()
        await producer.flush(timeout=10)  # the failure was reported once
        stats = producer.stats
    assert futures[0].result().offset == 0
    assert isinstance(futures[1].exception(), lb.IncorrectOffset)
    assert futures[2].result().offset == 1
    for silent in futures[3:5]:
        with pytest.raises(lb.AckTimeout):
            await silent
    assert (futures[5].result().offset, futures[5].result().partition) == (2, 0)
    assert (stats.confirmed, stats.failed) == (3, 3)
    assert client.stats.acks.unmatched >= 2  # the duplicate and the late ack


async def test_send_batch_refuses_a_too_large_value_before_sending_any(
    setup: tuple[lb.Client, FakeLeader, str],
) -> None:
    client, leader, stream = setup
    async with client.producer(stream, max_message_bytes=200) as producer:
        with pytest.raises(lb.MessageTooLarge, match="limit of 200 bytes"):
            await producer.send_batch([b"ok", b"x" * 300, b"ok"])
        assert producer.pending == 0
        futures = await producer.send_batch([b"ok", b"ok"])
        await producer.flush(timeout=10)
    assert [f.result().offset for f in futures] == [0, 1]
    assert [value for _, value in leader.received] == [b"ok", b"ok"]
