"""The Liftbridge consumer's subscription readers (harness broker), both of them.

grpcio: a thread per subscription iterates the gRPC stream and hands messages to the loop in
batches: it wakes the loop only when a task waits and no wake-up is pending. http2: the
event loop reads the stream itself and hands over what each socket read completed, waking a
task that waits in a run of messages once a batch is buffered. Checked here, for both: with
the loop kept busy, every message arrives once and in order while the loop is woken far fewer
times than there are messages (a structural count, not a timing); one stalled consumer does
not hold back another of the same client; closing the client leaves no thread, task or
socket behind.
"""

from __future__ import annotations

import asyncio

import pytest

import streamwire.liftbridge as lb
from streamwire import Message
from streamwire.errors import ClosedError
from streamwire.liftbridge._h2_subscription import WINDOW
from tests.integration.liftbridge.conftest import NewStream, reader_threads
from tests.proxy import LeakCheck, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.liftbridge]


@pytest.fixture(params=["grpcio", "http2"])
def subscribe_transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


SLACK = 30.0


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


async def publish(client: lb.Client, stream: str, items: list[bytes]) -> None:
    async with client.producer(stream) as producer:
        for start in range(0, len(items), 1000):
            await producer.send_batch(items[start : start + 1000])
        await producer.flush(timeout=SLACK)


async def test_a_busy_loop_gets_messages_in_batches(client: lb.Client, stream: str) -> None:
    count = 10_000
    await publish(client, stream, values("m", count))
    spins = 0
    stop = asyncio.Event()

    async def spin() -> None:  # keeps the loop busy: an iteration never waits for I/O
        nonlocal spins
        while not stop.is_set():
            spins += 1
            await asyncio.sleep(0)

    spinner = asyncio.create_task(spin())
    got: list[Message] = []
    try:
        async with client.consumer(stream, offset="first") as consumer, asyncio.timeout(SLACK):
            async for message in consumer:
                got.append(message)
                if len(got) == count:
                    break
            wakeups = consumer._handover.wakeups
            assert consumer._subscription is not None
            assert reader_threads()
    finally:
        stop.set()
        await spinner
    assert not reader_threads(), "the reader outlived close()"
    assert [m.offset for m in got] == list(range(count))  # no gap, no duplicate, in order
    assert [m.value for m in got] == values("m", count)
    assert spins > 0
    # grpc.aio took one read round trip, so at least one loop iteration, per message
    assert wakeups < count // 4, f"{wakeups} wake-ups for {count} messages"


async def test_a_stalled_consumer_does_not_hold_back_another_on_the_same_client(
    client: lb.Client, new_stream: NewStream, subscribe_transport: str
) -> None:
    """grpcio: both subscriptions share the client's synchronous channel (one HTTP/2
    connection); http2: a connection each. Flow control holds back the stalled stream only
    (http2: it stops after one window beyond the buffer)."""
    big, small = await new_stream(), await new_stream()
    count, size = 4800, 5000  # 24 MB, far beyond what one stream's window lets in
    await publish(client, big, [b"x" * size] * count)
    await publish(client, small, values("s", 2000))
    async with client.consumer(big, offset="first", max_buffered_messages=10) as stalled:
        await wait_until(lambda: len(stalled._handover) >= 10, SLACK, "the buffer fills")
        async with client.consumer(small, offset="first") as reading:
            got: list[Message] = []
            while len(got) < 2000:
                batch = await reading.next_batch(500, timeout=SLACK)
                assert batch, f"stalled after {len(got)} messages"
                got += batch
            assert [m.value for m in got] == values("s", 2000)
        channels = client._channels
        assert channels is not None
        sub = stalled._subscription
        assert sub is not None
        if subscribe_transport == "grpcio":
            assert len(channels._stream_channels) == 1
            assert len(stalled._handover) == 10
            assert sub.delivered == 10
        else:
            assert not channels._stream_channels
            assert len(stalled._handover) == sub.delivered
            assert sub.delivered * size <= 2 * WINDOW, f"{sub.delivered} in: not held back"


async def test_closing_the_client_ends_consumers_and_their_threads(
    url: str, client: lb.Client, stream: str, subscribe_transport: str
) -> None:
    await publish(client, stream, values("m", 3000))
    leaks = LeakCheck()
    pc = await lb.connect(url, timeout=10, subscribe_transport=subscribe_transport)
    try:
        first = pc.consumer(stream, offset="first", max_buffered_messages=100)
        second = pc.consumer(stream, offset="first")
        for consumer in (first, second):
            await consumer.start()
            assert await consumer.next_batch(50, timeout=SLACK)
        assert len(reader_threads()) == 2
        # the stream holds 3000: the first's buffer refills up to its bound; wait for that
        # rather than count on a read having arrived by the time close() runs
        await wait_until(lambda: first._handover.ready(), SLACK, "the first consumer buffers")
    finally:
        await pc.close()  # closes the consumers: not closed on their own
    assert not reader_threads()
    await leaks.verify()
    assert await first.next_batch(10, timeout=0)  # what was buffered can still be read
    with pytest.raises(ClosedError):
        pc.consumer(stream)


async def test_a_missing_stream_fails_start_and_leaves_no_thread(client: lb.Client) -> None:
    consumer = client.consumer("sw-lb-does-not-exist")
    with pytest.raises(lb.StreamNotFound):
        await consumer.start(timeout=SLACK)
    assert not reader_threads()
