"""The Iggy client under faults, on every lane (the double in both modes, and a real server
when the harness has one): a FaultProxy in front of the server cuts a connection while a
batch or a poll is in flight and black-holes it; the double itself is stopped and started
again while a producer publishes (double only).

What every scenario checks: each message's future ends, confirmed or with a typed streamwire
error; every confirmed message is stored at its offset (polled back afterwards); consumers
resume right after the last message they handed out, or after their committed offset;
nothing the client under test opened (tasks, sockets) is left after it is closed.

What the restart proves, and what not: the double keeps its state object across
``stop()``/``start_again()`` (same port), so this is a server coming back on its data. It
shows the client's side (in-flight work fails typed, later batches re-dial, log in again and
continue; offsets carry on). It says nothing about a real Iggy's on-disk durability.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import streamwire.iggy as iggy
from streamwire.errors import RequestTimeout, StreamwireError, TransportError
from streamwire.errors import TimeoutError as SwTimeoutError
from tests.iggy_double import IggyDouble
from tests.iggy_lanes import Lane
from tests.outcomes import Sent, confirmed, failures, settle
from tests.proxy import FaultProxy, LeakCheck, wait_until

ADDRESS = "faults/t"
#: Added to every bound, for a loaded two-core machine.
SLACK = 10.0
REDIAL = iggy.ReconnectPolicy(initial_delay=0.05, max_delay=0.3, max_elapsed=20.0)


@pytest.fixture
async def proxy(server: Lane) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(server.host, server.port) as p:
        yield p


async def via(proxy: FaultProxy, **options: object) -> iggy.Client:
    return await iggy.connect(f"iggy://iggy:iggy@127.0.0.1:{proxy.port}", **options)  # type: ignore[arg-type]


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


async def stored(client: iggy.Client) -> dict[int, bytes]:
    """offset → value of everything in partition 0 (polled from the start)."""
    out: dict[int, bytes] = {}
    async with client.consumer(ADDRESS, offset="first", batch_size=1000) as consumer:
        while batch := await consumer.next_batch(1000, timeout=0.5):
            for m in batch:
                assert m.offset is not None
                assert m.offset not in out
                out[m.offset] = m.value
    return out


def assert_readable(found: dict[int, bytes], acked: dict[int, bytes]) -> None:
    wrong = {o: v for o, v in acked.items() if found.get(o) != v}
    assert not wrong, f"confirmed but not stored as confirmed: {sorted(wrong.items())[:5]}"
    assert len(set(found.values())) == len(found), "a message was stored twice"


async def test_cut_with_a_batch_in_flight(client: iggy.Client, proxy: FaultProxy) -> None:
    await client.create_stream(ADDRESS)
    leaks = LeakCheck()
    pc = await via(proxy, timeout=5, request_timeout=5, reconnect=REDIAL)
    try:
        async with pc.producer(ADDRESS, max_batch_messages=100) as producer:
            before = [(v, await producer.send(v)) for v in values("a", 300)]
            await producer.flush(timeout=SLACK)
            proxy.latency = 0.5  # no reply can come back for a second
            around = [(v, await producer.send(v)) for v in values("b", 300)]
            await wait_until(lambda: bool(producer._inflight), SLACK, "a batch in flight")
            assert proxy.cut() >= 1
            proxy.latency = 0.0
            await settle(around, SLACK)
            with pytest.raises(TransportError):  # flush reports the failure since the last one
                await producer.flush(timeout=SLACK)
            after = [(v, await producer.send(v)) for v in values("c", 300)]
            await producer.flush(timeout=SLACK)
    finally:
        await pc.close()
    await leaks.verify()

    assert not failures(before)
    lost = failures(around)
    assert lost, "the batch in flight at the cut should have failed"
    assert all(isinstance(e, TransportError) for e in lost), lost[:3]
    # the batches in flight (up to max_in_flight of 100): the rest went over the new connection
    assert len(lost) <= 100 * pc.settings.max_in_flight
    assert not failures(after)
    assert proxy.connections_made >= 3  # management, producer, producer again
    assert_readable(await stored(client), confirmed(before + around + after))


@pytest.mark.parametrize("prefetch", [False, True], ids=["lock-step", "prefetch"])
async def test_cut_mid_poll_resumes_after_the_last_message_and_the_commit(
    client: iggy.Client, proxy: FaultProxy, prefetch: bool
) -> None:
    await client.create_stream(ADDRESS)
    await client.send(ADDRESS, values("m", 1000))
    leaks = LeakCheck()
    pc = await via(proxy, timeout=5, request_timeout=5, reconnect=REDIAL)
    try:
        async with pc.consumer(
            ADDRESS, name="reader", offset="first", batch_size=100, prefetch=prefetch
        ) as c:
            got = []
            for _ in range(3):
                got += await c.next_batch(100, timeout=SLACK)
            await c.commit()  # offset 299
            proxy.latency = 0.5  # the next poll's reply cannot come back for a second
            polling = asyncio.create_task(c.next_batch(100, timeout=SLACK))
            await wait_until(
                lambda: c._conn is not None and c._conn.machine.pending is not None,
                SLACK,
                "a poll in flight",
            )
            assert proxy.cut() >= 1
            proxy.latency = 0.0

            async def up_to_the_lost_poll() -> None:
                got.extend(await polling)
                # with prefetch, the call above took a reply polled ahead, and the replies
                # that came back before the cut are handed out before the lost one fails
                assert prefetch, "the poll in flight should have failed this call"
                for _ in range(pc.settings.max_in_flight):
                    got.extend(await c.next_batch(100, timeout=SLACK))

            with pytest.raises(TransportError):  # the poll whose reply was lost: a typed error
                await up_to_the_lost_poll()
            while len(got) < 1000:
                batch = await c.next_batch(500, timeout=SLACK)  # re-dials, polls Offset(300)
                assert batch, f"stalled after {len(got)} messages"
                got += batch
        async with pc.consumer(ADDRESS, name="reader", offset="next", batch_size=100) as again:
            resumed = await again.next_batch(10, timeout=SLACK)
    finally:
        await pc.close()
    await leaks.verify()
    assert [m.offset for m in got] == list(range(1000))  # no gap, no duplicate
    assert [m.value for m in got] == values("m", 1000)
    assert [m.offset for m in resumed] == list(range(300, 310))  # after the committed 299


async def test_black_hole_is_detected_within_the_client_timeouts(
    client: iggy.Client, proxy: FaultProxy
) -> None:
    await client.create_stream(ADDRESS)
    leaks = LeakCheck()
    request_timeout, heartbeat, connect_timeout = 1.0, 0.5, 2.0
    pc = await via(
        proxy,
        timeout=connect_timeout,
        request_timeout=request_timeout,
        heartbeat_interval=heartbeat,
        reconnect=None,
    )
    try:
        idle = await pc.connection()
        async with pc.producer(ADDRESS) as producer:
            await producer.send_and_wait(b"before", timeout=SLACK)
            proxy.blackhole(True)
            future = await producer.send(b"into the void")
            with pytest.raises(RequestTimeout):  # the reply deadline, not the 30 s flush
                await asyncio.wait_for(future, request_timeout + SLACK)
        # The idle management connection: its heartbeat Ping is never answered.
        await wait_until(
            lambda: idle.error is not None, heartbeat + request_timeout + SLACK, "dead idle link"
        )
        assert isinstance(idle.error, RequestTimeout)
        with pytest.raises(SwTimeoutError):  # re-dialling into the black hole: no login reply
            await asyncio.wait_for(pc.ping(), connect_timeout + SLACK)
        proxy.blackhole(False)
        await asyncio.wait_for(pc.ping(), SLACK)  # and a working link again
    finally:
        proxy.blackhole(False)
        await pc.close()
    proxy.cut()  # the proxy's own half of the black-holed links
    await leaks.verify()


async def test_server_restart_mid_publish(client: iggy.Client, double: IggyDouble) -> None:
    await client.create_stream(ADDRESS)
    await client.close()  # its connection would only die with the restart
    leaks = LeakCheck()
    pc = await iggy.connect(double.url, timeout=5, request_timeout=5, reconnect=REDIAL)
    sent: Sent = []
    stop = asyncio.Event()

    async def publish(producer: iggy.Producer) -> None:
        i = 0
        while not stop.is_set():
            value = f"m{i}".encode()
            i += 1
            sent.append((value, await producer.send(value)))
            await asyncio.sleep(0.002)

    def confirmed_since(mark: int) -> int:
        return sum(1 for _, f in sent[mark:] if f.done() and f.exception() is None)

    task: asyncio.Task[None] | None = None
    try:
        async with pc.producer(ADDRESS, max_batch_messages=50) as producer:
            task = asyncio.create_task(publish(producer))
            await wait_until(lambda: confirmed_since(0) >= 200, SLACK, "publishing")
            await double.stop()
            down = len(sent)
            await wait_until(lambda: len(sent) >= down + 100, SLACK, "sends while down")
            await double.start_again()
            up = len(sent)
            await wait_until(lambda: confirmed_since(up) >= 200, SLACK, "publishing again")
            stop.set()
            await asyncio.wait_for(task, SLACK)
            await settle(sent, SLACK)
    finally:
        stop.set()
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})
        await pc.close()
    assert double._server is not None
    await leaks.verify(expected=[s.fileno() for s in double._server.sockets])

    lost = failures(sent)
    assert all(isinstance(e, StreamwireError) for e in lost), lost[:3]
    assert len(lost) <= 50  # at most the batch in flight when the server went away
    assert not failures(sent[up:])
    before, after = confirmed(sent[:down]), confirmed(sent[up:])
    assert min(after) > max(before)  # the offsets carry on: the state came back
    async with await iggy.connect(double.url, timeout=5, reconnect=None) as reader:
        assert_readable(await stored(reader), confirmed(sent))
