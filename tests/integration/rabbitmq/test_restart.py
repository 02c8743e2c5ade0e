"""The broker itself restarted (``integration/brokers.sh restart``) while a deduplicating
named producer publishes and a named consumer reads.

Afterwards every message is in the stream exactly once, in order, and the broker's
publishing sequence for the producer's name (QueryPublisherSequence, read by a new producer
of that name) is the last id sent. The producer either recovered by itself (re-declared and
re-sent its unconfirmed messages with their ids), or failed with a typed error and a new
producer of the same name resumed after the broker's sequence. The consumer resumed after
the last message it handed out (no gap, no duplicate), and the offset it committed before
the restart survived it.

Only brokers the harness runs are restarted (see ``tests.brokers.restart_blocker``); the
test leaves the broker up in any case. RabbitMQ 4.x is shared with other test runs: its
parameter restarts it too.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

import streamwire.rabbitmq as rmq
from streamwire.codec.message import Confirmation
from streamwire.errors import StreamwireError
from tests import brokers
from tests.brokers import BrokerInfo, require, skip_missing
from tests.proxy import LeakCheck, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.rabbitmq, pytest.mark.one_core]

#: Long enough for a broker restart (about 15 s for 3.10 on two busy cores) several times.
RECOVERY = rmq.ReconnectPolicy(initial_delay=0.2, max_delay=1.0, max_elapsed=120.0)
SLACK = 60.0


@pytest.fixture(params=["rabbitmq310", "rabbitmq40", "rabbitmq"])
def broker(request: pytest.FixtureRequest) -> BrokerInfo:
    """Overrides the package fixture: only brokers this test may restart."""
    info = require(request.param)
    reason = brokers.restart_blocker(info)
    if reason is not None:
        skip_missing(reason)
    return info


async def read_all(client: rmq.Client, stream: str, expect: int) -> list[bytes]:
    out: list[bytes] = []
    async with client.consumer(stream, offset="first") as c, asyncio.timeout(SLACK):
        while len(out) < expect:
            out += [m.value for m in await c.next_batch(1000, timeout=5)]
        out += [m.value for m in await c.next_batch(1000, timeout=0.5)]
    return out


async def test_named_producer_and_consumer_survive_a_broker_restart(
    broker: BrokerInfo, client: rmq.Client, stream: str
) -> None:
    name = f"restart-{uuid.uuid4().hex[:8]}"
    reader = f"reader-{uuid.uuid4().hex[:8]}"
    sent: list[bytes] = []
    futures: list[asyncio.Future[Confirmation]] = []
    refused: list[StreamwireError] = []
    received: list[bytes] = []
    stop = asyncio.Event()
    restarting: asyncio.Task[str] | None = None
    background: list[asyncio.Task[None]] = []
    leaks = LeakCheck()
    pc = await rmq.connect(broker.url, timeout=10, reconnect=RECOVERY)
    try:
        producer = await pc.producer(stream, name=name)
        consumer = await pc.consumer(stream, offset="first", name=reader)

        async def publish() -> None:
            i = 0
            while not stop.is_set():
                value = f"m{i}".encode()
                try:
                    futures.append(await producer.send(value, timeout=SLACK))
                except StreamwireError as exc:  # the producer gave up: resumed below
                    refused.append(exc)
                    return
                sent.append(value)
                i += 1
                await asyncio.sleep(0.005)

        async def consume() -> None:
            while True:
                received.extend(m.value for m in await consumer.next_batch(500, timeout=1))

        def settled_since(mark: int) -> int:
            return sum(1 for f in futures[mark:] if f.done() and f.exception() is None)

        publishing = asyncio.create_task(publish())
        consuming = asyncio.create_task(consume())
        background += [publishing, consuming]
        await wait_until(lambda: settled_since(0) >= 200 and len(received) >= 100, 30, "flow")
        committed, handed_out = consumer.last_offset, len(received)
        assert committed is not None
        await consumer.commit()
        async with asyncio.timeout(10):  # StoreOffset has no answer: read it back
            while True:
                if await consumer.committed_offset() == committed:
                    break
                await asyncio.sleep(0.1)

        restarting = asyncio.create_task(brokers.restart(broker.name))
        try:
            await restarting
        except brokers.NotManaged as exc:
            skip_missing(f"the harness does not run {broker.name}: {exc}")
        up = len(sent)
        await wait_until(
            lambda: settled_since(up) >= 200 or bool(refused), SLACK, "publishing after restart"
        )
        stop.set()
        await asyncio.wait_for(publishing, SLACK)
        try:
            await producer.flush(timeout=SLACK)
            recovered = not refused
        except StreamwireError:
            recovered = False
        _, pending = await asyncio.wait(futures, timeout=SLACK)
        assert not pending
        failed = [f.exception() for f in futures if f.exception() is not None]
        assert all(isinstance(e, StreamwireError) for e in failed), failed[:3]
        if recovered:
            assert not failed
            assert [f.result().publishing_id for f in futures] == list(range(1, len(sent) + 1))
        await producer.close()

        # A new producer of the same name starts after the broker's sequence
        # (QueryPublisherSequence); whatever the first one could not store is sent again.
        async with pc.producer(stream, name=name) as again:
            stored = again.next_publishing_id - 1
            assert 0 < stored <= len(sent)
            acked = [f.result().publishing_id for f in futures if f.exception() is None]
            assert all(i is not None and i <= stored for i in acked)
            for value in sent[stored:]:
                await again.send(value)
            await again.flush(timeout=SLACK)
            assert again.next_publishing_id == len(sent) + 1

        await wait_until(
            lambda: len(received) >= len(sent) or consuming.done(), SLACK, "consumer caught up"
        )
        consuming.cancel()
        await asyncio.wait({consuming})
        assert consuming.cancelled(), consuming.exception()
        await consumer.close()
        async with pc.consumer(stream, offset="next", name=reader) as resumed:
            first = await resumed.next_batch(1, timeout=SLACK)
    finally:
        stop.set()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await pc.close()
        if restarting is not None:  # leave the broker up, whatever happened
            if not restarting.done():
                await asyncio.wait({restarting}, timeout=300)
            await brokers.ensure_up(broker.name)
    await leaks.verify()

    assert received == sent  # resumed after the last message handed out
    # The commit survived the restart. (Offsets are not message counts: a stored offset is
    # itself a tracking entry in the stream's log and takes an offset.)
    assert [m.value for m in first] == [sent[handed_out]]
    assert first[0].offset is not None
    assert first[0].offset > committed
    assert await read_all(client, stream, len(sent)) == sent  # every message exactly once
