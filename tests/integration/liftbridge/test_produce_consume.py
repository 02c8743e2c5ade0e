"""Publishing over NATS and subscribing over gRPC, against the real Liftbridge v1.9.0."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

import streamwire
import streamwire.liftbridge as lb
from streamwire import ConfigurationError, HeaderValue, Message
from streamwire.errors import ConnectionClosed
from streamwire.liftbridge import _nats
from streamwire.liftbridge._nats import flush_in_order
from streamwire.liftbridge.protocol.messages import partition_for_key
from tests.integration.liftbridge.conftest import NewStream

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]


async def read(consumer: lb.Consumer, count: int, timeout: float = 10.0) -> list[Message]:
    """``count`` messages, failing the test if they do not arrive within ``timeout``."""
    out: list[Message] = []
    async with asyncio.timeout(timeout):
        while len(out) < count:
            out.extend(await consumer.next_batch(count - len(out), timeout=timeout))
    return out


async def test_round_trip_with_headers_and_keys(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        first = await producer.send_and_wait(
            b"hello", key=b"k1", headers={"text": "héllo", "raw": b"\x00\xff", "n": 7}
        )
        second = await producer.send_and_wait(Message(b"second", key=b"k2"))
        third = await producer.send_and_wait(b"")
    assert (first.offset, second.offset, third.offset) == (0, 1, 2)
    assert first.stream == stream
    assert first.partition == 0
    async with client.consumer(stream, offset="first") as consumer:
        got = await read(consumer, 3)
    assert [m.value for m in got] == [b"hello", b"second", b""]
    assert [m.key for m in got] == [b"k1", b"k2", None]
    assert [m.offset for m in got] == [0, 1, 2]
    assert got[0].headers == {  # kinds survive through the streamwire.kinds header
        "text": HeaderValue.string("héllo"),
        "raw": HeaderValue.raw(b"\x00\xff"),
        "n": HeaderValue.int64(7),
    }
    assert got[0].headers["text"].as_bytes().decode() == "héllo"
    assert got[1].headers == {}
    assert all(m.stream == stream and m.partition == 0 for m in got)
    assert got[0].timestamp is not None
    assert abs((datetime.now(UTC) - got[0].timestamp).total_seconds()) < 3600


async def test_server_headers_on_request(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"x", headers={"h": b"v"})
    async with client.consumer(stream, server_headers=True) as consumer:
        (msg,) = await read(consumer, 1)
    assert msg.headers["subject"].as_bytes() == stream.encode()
    assert msg.headers["reply"].as_bytes() == b""
    assert msg.headers["h"].as_bytes() == b"v"


async def test_send_batch_and_flush(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        futures = await producer.send_batch([f"m{i}".encode() for i in range(500)])
        await producer.flush()
        assert producer.pending == 0
    assert sorted(f.result().offset or 0 for f in futures) == list(range(500))
    async with client.consumer(stream) as consumer:
        got = await read(consumer, 500)
    assert [m.value for m in got] == [f"m{i}".encode() for i in range(500)]


async def test_partitions_by_key_round_robin_and_explicit(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(partitions=3)
    keys = [f"key-{i}".encode() for i in range(12)]
    async with client.producer(stream) as producer:
        assert producer.partitions == 3
        by_key = [await producer.send_and_wait(b"k", key=k) for k in keys]
        robin = [await producer.send_and_wait(b"rr") for _ in range(6)]
        explicit = await producer.send_and_wait(b"explicit", partition=2)
        with pytest.raises(ConfigurationError):
            await producer.send(b"x", partition=3)
    assert [c.partition for c in by_key] == [partition_for_key(k, 3) for k in keys]
    assert sorted(c.partition or 0 for c in robin) == [0, 0, 1, 1, 2, 2]
    assert explicit.partition == 2
    counts = dict.fromkeys(range(3), 0)
    for c in [*by_key, *robin, explicit]:
        counts[c.partition or 0] += 1
    for p in range(3):
        async with client.consumer(stream, partition=p) as consumer:
            got = await read(consumer, counts[p])
        assert all(m.partition == p for m in got)
        assert [m.offset for m in got] == list(range(counts[p]))
        expected = {k for k in keys if partition_for_key(k, 3) == p}
        assert {m.key for m in got if m.value == b"k"} == expected


async def test_send_batch_over_partitions_confirms_each_in_its_own(
    client: lb.Client, new_stream: NewStream
) -> None:
    """A batch spread over partitions (round robin, by key) is one ack run per partition:
    each future still reports its own partition and offset, in the order sent."""
    stream = await new_stream(partitions=3)
    keys = [f"key-{i}".encode() for i in range(6)]
    async with client.producer(stream, max_in_flight=4) as producer:
        robin = await producer.send_batch([b"rr%d" % i for i in range(9)])
        keyed = await producer.send_batch([Message(b"k", key=k) for k in keys])
        await producer.flush(timeout=30)
        assert producer.pending == 0
        stats = producer.stats
    got = [f.result() for f in robin + keyed]
    assert [c.partition for c in got[9:]] == [partition_for_key(k, 3) for k in keys]
    assert sorted(c.partition or 0 for c in got[:9]) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for c in got:
        seen[c.partition or 0].append(c.offset or 0)
    assert all(offsets == list(range(len(offsets))) for offsets in seen.values())
    assert (stats.confirmed, stats.failed) == (15, 0)


@pytest.mark.parametrize("policy", [lb.AckPolicy.LEADER, lb.AckPolicy.ALL])
async def test_acked_policies_report_offsets(
    client: lb.Client, stream: str, policy: lb.AckPolicy
) -> None:
    async with client.producer(stream, ack_policy=policy) as producer:
        confs = [await producer.send_and_wait(f"{i}".encode()) for i in range(3)]
    assert [c.offset for c in confs] == [0, 1, 2]
    # with nats-py 2.16 every ack is taken straight from its parser (NatsLink.deliver_directly),
    # unless that fast path is switched off (STREAMWIRE_NATS_FAST=0): then none is
    direct = 3 if _nats._FAST.direct else 0
    assert (client.stats.acks.acks, client.stats.acks.direct) == (3, direct)


async def test_ack_policy_none_confirms_without_offsets(client: lb.Client, stream: str) -> None:
    async with client.producer(stream, ack_policy=lb.AckPolicy.NONE) as producer:
        conf = await producer.send_and_wait(b"fire")
        await producer.flush()
    assert conf.offset is None
    assert client.stats.acks.unmatched == 0
    async with client.consumer(stream) as consumer:
        (msg,) = await read(consumer, 1)
    assert msg.value == b"fire"


async def test_crc_envelopes_are_accepted(client: lb.Client, stream: str) -> None:
    async with client.producer(stream, crc=True) as producer:
        conf = await producer.send_and_wait(b"checked", key=b"k")
    assert conf.offset == 0
    async with client.consumer(stream) as consumer:
        (msg,) = await read(consumer, 1)
    assert (msg.value, msg.key) == (b"checked", b"k")


async def test_plain_publish_is_stored_as_is(client: lb.Client, stream: str) -> None:
    async with client.producer(stream, envelope=False) as producer:
        conf = await producer.send_and_wait(b"plain nats payload")
        await producer.flush()
        with pytest.raises(ConfigurationError):
            await producer.send(b"x", key=b"k")
    assert conf.offset is None
    async with client.consumer(stream, server_headers=True) as consumer:
        (msg,) = await read(consumer, 1)
    assert msg.value == b"plain nats payload"
    assert msg.key is None
    assert msg.headers["subject"].as_bytes() == stream.encode()


async def test_reserved_header_names_are_refused(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        for name in ("subject", "reply"):
            with pytest.raises(ConfigurationError, match="reserved"):
                await producer.send(b"x", headers={name: b"v"})


async def test_payload_size_is_checked_before_publishing(client: lb.Client, stream: str) -> None:
    limit = client.max_payload
    assert limit == 1024 * 1024  # nats-server's default max_payload
    async with client.producer(stream) as producer:
        with pytest.raises(lb.MessageTooLarge):
            await producer.send(b"x" * limit)
        fits = await producer.send_and_wait(b"x" * (limit - 64))
        assert fits.offset == 0
    async with client.producer(stream, max_message_bytes=100) as small:
        with pytest.raises(lb.MessageTooLarge):
            await small.send(b"x" * 100)


async def test_expected_offset_on_an_occ_stream(client: lb.Client, new_stream: NewStream) -> None:
    stream = await new_stream(optimistic_concurrency_control=True)
    async with client.producer(stream) as producer:
        first = await producer.send_and_wait(b"a", expected_offset=0)
        with pytest.raises(lb.IncorrectOffset) as info:
            await producer.send_and_wait(b"b", expected_offset=5)
        assert info.value.code == 2
        second = await producer.send_and_wait(b"c", expected_offset=1)
        with pytest.raises(lb.IncorrectOffset):
            await producer.flush()  # flush reports the failure since the last flush
    assert (first.offset, second.offset) == (0, 1)
    async with client.consumer(stream) as consumer:
        got = await read(consumer, 2)
    assert [m.value for m in got] == [b"a", b"c"]


async def test_missing_stream_fails_fast_at_start(client: lb.Client) -> None:
    with pytest.raises(lb.StreamNotFound):
        async with client.producer("sw-lb-does-not-exist-4f1d"):
            pass
    with pytest.raises(lb.StreamNotFound):
        async with client.consumer("sw-lb-does-not-exist-4f1d"):
            pass


async def test_deleted_stream_times_out_with_a_typed_error(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream()
    async with client.producer(stream, ack_timeout=0.5) as producer:
        await client.delete_stream(stream)
        with pytest.raises(lb.AckTimeout):
            await producer.send_and_wait(b"lost")
        with pytest.raises(TimeoutError):  # the builtin catches it too
            await producer.send_and_wait(b"lost again")


async def test_deleted_stream_fails_at_once_with_no_responders(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream()
    async with client.producer(stream, detect_no_responders=True, ack_timeout=30) as producer:
        assert (await producer.send_and_wait(b"stored")).offset == 0
        await client.delete_stream(stream)
        with pytest.raises(lb.NoResponders) as info:
            await producer.send_and_wait(b"nobody listens", timeout=20)
        assert info.value.retriable
    assert client.stats.acks.no_responders == 1


async def test_no_responders_mode_stores_the_reply_subject(client: lb.Client, stream: str) -> None:
    async with client.producer(stream, detect_no_responders=True) as producer:
        await producer.send_and_wait(b"x")
    async with client.consumer(stream, server_headers=True) as consumer:
        (msg,) = await read(consumer, 1)
    assert msg.headers["reply"].as_bytes().startswith(b"_INBOX.")


async def test_garbage_on_the_ack_inbox_is_dropped(client: lb.Client, stream: str) -> None:
    import nats

    assert client._acks is not None
    nc = await nats.connect(client.nats_servers)
    try:
        await nc.publish(client._acks.ack_inbox, b"not an envelope")
        await flush_in_order(nc, 10)
    finally:
        await nc.close()
    async with client.producer(stream) as producer:
        assert (await producer.send_and_wait(b"still fine")).offset == 0
    assert client.stats.acks.invalid >= 1


# --- start positions, stops, batches ------------------------------------------------------


async def test_every_start_position(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        for i in range(5):
            await producer.send_and_wait(f"m{i}".encode())
    middle = datetime.now(UTC)
    await asyncio.sleep(0.05)
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"m5")
    cases: list[tuple[streamwire.Offset | str | int | datetime, int]] = [
        ("first", 0),
        ("last", 5),
        (3, 3),
        (streamwire.Offset.at(4), 4),
        (middle, 5),
    ]
    for offset, expected in cases:
        async with client.consumer(stream, offset=offset) as consumer:
            (msg,) = await read(consumer, 1)
        assert msg.offset == expected, offset
    async with client.consumer(stream, offset="next") as consumer:
        assert await consumer.next(timeout=0.3) is None
        async with client.producer(stream) as producer:
            await producer.send_and_wait(b"new")
        (msg,) = await read(consumer, 1)
    assert (msg.offset, msg.value) == (6, b"new")


async def test_an_offset_beyond_the_end_waits_for_that_offset(
    client: lb.Client, stream: str
) -> None:
    """The server (v1.9.0) starts such a subscription at the high watermark + 1; the
    consumer drops the messages before the offset it asked for."""
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"m0")
        async with client.consumer(stream, offset=3) as consumer:
            for i in range(1, 6):
                await producer.send_and_wait(f"m{i}".encode())
            got = await read(consumer, 3)
    assert [(m.offset, m.value) for m in got] == [(3, b"m3"), (4, b"m4"), (5, b"m5")]


async def test_stop_offset_and_stop_latest_end_iteration(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        for i in range(5):
            await producer.send_and_wait(f"m{i}".encode())
    async with client.consumer(stream, stop_offset=2) as consumer:
        assert [m.offset async for m in consumer] == [0, 1, 2]
    async with client.consumer(stream, offset=3, stop_latest=True) as consumer:
        assert [m.offset async for m in consumer] == [3, 4]


async def test_next_batch(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        await producer.send_batch([b"x"] * 20)
        await producer.flush()
    async with client.consumer(stream) as consumer:
        got = await read(consumer, 20)
        assert len(got) == 20
        assert await consumer.next_batch(10, timeout=0.2) == []


async def test_readonly_partition_ends_the_subscription(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"before")
    await client.set_stream_readonly(stream)
    assert (await client.partition_metadata(stream)).readonly
    async with client.consumer(stream) as consumer:
        assert [m.value async for m in consumer] == [b"before"]


async def test_pause_while_subscribed_resumes_the_partition(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        for i in range(3):
            await producer.send_and_wait(f"m{i}".encode())
    async with client.consumer(stream, resume=True) as consumer:
        assert [m.offset for m in await read(consumer, 3)] == [0, 1, 2]
        await client.pause_stream(stream)
        # The broken subscription is made again with resume=True, which un-pauses the
        # partition; NATS publishes are lost while nobody leads it, hence the retries.
        async with client.producer(stream, ack_timeout=1.0) as producer:
            async with asyncio.timeout(30):
                while True:
                    try:
                        await producer.send_and_wait(b"after")
                        break
                    except lb.AckTimeout:
                        continue
        (msg,) = await read(consumer, 1)
        assert (msg.offset, msg.value) == (3, b"after")
        assert consumer.resubscriptions >= 1


async def test_paused_partition_without_resume_gives_up_after_the_policy(
    url: str, stream: str
) -> None:
    """A paused partition accepts subscriptions and closes them at once (FailedPrecondition,
    "commit log was closed"); without resume=True the consumer backs off and gives up."""
    policy = lb.ReconnectPolicy(initial_delay=0.05, max_delay=0.2, max_elapsed=1.0)
    async with await lb.connect(url, timeout=10, reconnect=policy) as client:
        async with client.consumer(stream) as consumer:
            await client.pause_stream(stream)
            with pytest.raises(ConnectionClosed) as info:
                async with asyncio.timeout(30):
                    await consumer.next()
            assert isinstance(info.value.__cause__, lb.FailedPrecondition)
        assert (await client.stream_info(stream)).partitions[0].paused
        # v1.9.0: a paused partition has no leader to ask for partition metadata
        with pytest.raises(lb.FailedPrecondition, match="partition leader"):
            await client.partition_metadata(stream)


async def test_publishes_to_a_readonly_partition_get_no_ack(client: lb.Client, stream: str) -> None:
    await client.set_stream_readonly(stream)
    async with client.producer(stream, ack_timeout=0.5) as producer:
        with pytest.raises(lb.AckTimeout):
            await producer.send_and_wait(b"dropped")


async def test_subscription_fails_when_the_stream_is_deleted(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream()
    async with client.consumer(stream) as consumer:
        await client.delete_stream(stream)
        with pytest.raises(lb.StreamNotFound):
            async with asyncio.timeout(10):
                await consumer.next()


async def test_connect_by_url_through_streamwire(url: str, stream: str) -> None:
    async with streamwire.connect(url, timeout=10) as c:
        assert isinstance(c, lb.Client)
        async with c.producer(stream) as producer:
            assert (await producer.send_and_wait(b"via streamwire.connect")).offset == 0


async def test_stats_count_acks_refusals_and_timeouts(
    client: lb.Client, new_stream: NewStream
) -> None:
    stream = await new_stream(optimistic_concurrency_control=True)
    async with client.producer(stream) as producer:
        await producer.send_and_wait(b"a", expected_offset=0)
        with pytest.raises(lb.IncorrectOffset):
            await producer.send_and_wait(b"b", expected_offset=5)
        await producer.send_batch([b"c", b"d", b"e"])
        with pytest.raises(lb.IncorrectOffset):  # flush reports the failure since the last
            await producer.flush()
        stats = producer.stats
    assert (stats.published, stats.confirmed, stats.failed, stats.in_flight) == (5, 4, 1, 0)
    assert stats.bytes_published > len(b"abcde")  # envelopes
    assert stats.confirm_latency.count == 4
    async with client.producer(stream, ack_policy=lb.AckPolicy.NONE) as unacked:
        await unacked.send_batch([b"f", b"g"])
        assert (unacked.stats.published, unacked.stats.confirmed) == (2, 2)
    async with client.producer(stream, ack_timeout=0.2) as lost:
        await client.delete_stream(stream)
        with pytest.raises(lb.AckTimeout):
            await lost.send_and_wait(b"nobody stores it")
        assert (lost.stats.failed, lost.stats.in_flight) == (1, 0)
    connections = client.stats
    assert (connections.connects, connections.reconnects, connections.errors) == (1, 0, 0)
    assert connections.acks.acks >= 4  # the Liftbridge counters are still there


async def test_consumer_stats_have_no_lag(client: lb.Client, stream: str) -> None:
    async with client.producer(stream) as producer:
        await producer.send_batch([b"m%d" % i for i in range(6)])
        await producer.flush()
    async with client.consumer(stream, name="counted") as consumer:
        first = await consumer.next(timeout=10)
        assert first is not None
        rest = await read(consumer, 5)
        await consumer.commit()
        stats = consumer.stats
    assert (stats.consumed, stats.last_offset, stats.committed_offset) == (6, 5, 5)
    assert stats.bytes_consumed > sum(len(m.value) for m in [first, *rest])
    assert stats.lag is None  # Liftbridge does not say where the partition ends
