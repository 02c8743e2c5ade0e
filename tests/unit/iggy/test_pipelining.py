"""Requests in flight together on one connection (``max_in_flight`` > 1): the machine's rules
(which requests may share the connection, FIFO matching of replies, retries refused once a
later request went out, every waiter failed at once) and the asyncio driver's ``submit``."""

from __future__ import annotations

import asyncio

import pytest

from streamwire.errors import (
    BusyError,
    ConfigurationError,
    ConnectionClosed,
    RequestTimeout,
    ServerError,
)
from streamwire.iggy._connection import Connection
from streamwire.iggy.protocol import events as ev
from streamwire.iggy.protocol import streams as st
from streamwire.iggy.protocol import system as sy
from streamwire.iggy.protocol.constants import Operation
from streamwire.iggy.protocol.errors import StaleClient, TransientNotCommitted
from streamwire.iggy.protocol.framing import (
    decode_request,
    encode_eviction,
    encode_reply,
    encode_result_section,
)
from streamwire.iggy.protocol.identifiers import Identifier
from streamwire.iggy.protocol.machine import ConnectionState, MachineSettings
from tests.unit.iggy.test_connection import Server
from tests.unit.iggy.test_connection import connect as connect_with
from tests.unit.iggy.test_machine import login, machine, reply_to

S1 = Identifier("s1")


def test_reads_pipeline_up_to_the_limit_and_replies_match_in_order() -> None:
    m = machine(max_in_flight=3)
    login(m)
    first, second, third = (m.send(st.GetStream(Identifier(n)), 0) for n in "abc")
    assert m.in_flight == 3
    assert not m.can_send(Operation.NON_REPLICATED)
    with pytest.raises(BusyError):
        m.send(sy.Ping(), 0)
    # two replies in one read: each resolves the oldest request still waiting
    events = m.receive_data(reply_to(m, first) + reply_to(m, second), 0)
    assert [e.request for e in events if isinstance(e, ev.ReplyReceived)] == [first, second]
    assert m.pending is third
    assert m.can_send(Operation.SEND_MESSAGES)


def test_requests_that_must_go_alone() -> None:
    m = machine(max_in_flight=4)
    login(m)
    m.send(st.GetStreams(), 0)
    with pytest.raises(BusyError):  # a metadata op waits until nothing is in flight
        m.send(st.CreateStream(name="s1"), 0)
    m2 = machine(max_in_flight=4)
    login(m2)
    m2.send(st.CreateStream(name="s1"), 0)
    with pytest.raises(BusyError):  # and nothing joins it
        m2.send(sy.Ping(), 0)


def test_reads_sharing_a_number_are_told_apart_by_their_stamp() -> None:
    m = machine(max_in_flight=2)
    login(m)
    streams = m.send(st.GetStreams(), 0)  # operation 2, request 1
    ping = m.send(sy.Ping(), 0)  # operation 2, request 1 too: reads do not take a new number
    frames = m.data_to_send()
    first, second = (
        decode_request(frames[: len(streams.frame)]),
        decode_request(frames[len(streams.frame) :]),
    )
    assert (first.request, first.timestamp) == (1, 0)  # alone on its number: as the SDK sends
    assert ping.stamp
    assert (second.request, second.timestamp) == (1, ping.stamp)
    # the server echoes the timestamp: the ping's reply, first, resolves the ping
    echo = encode_reply(b"", client=m.client_id, request=1, operation=2, timestamp=ping.stamp)
    (event,) = m.receive_data(echo, 0)
    assert isinstance(event, ev.ReplyReceived)
    assert event.request is ping
    assert m.stats.out_of_order == 1
    (event,) = m.receive_data(reply_to(m, streams), 0)
    assert isinstance(event, ev.ReplyReceived)
    assert event.request is streams


def test_a_reply_to_a_number_nobody_sent_fails_the_connection() -> None:
    m3 = machine(max_in_flight=2)
    login(m3)
    m3.send(st.GetStreams(), 0)
    other = encode_reply(b"", client=m3.client_id, request=7, operation=2)
    (failed,) = m3.receive_data(other, 0)
    assert isinstance(failed, ev.ProtocolFailed)
    assert "no pending request" in str(failed.error)
    assert m3.state is ConnectionState.FAILED


def test_retry_is_refused_once_a_later_request_went_out() -> None:
    m = machine(max_in_flight=2)
    login(m)
    p = m.send(st.CreateStream(name="s1"), 0)
    (event,) = m.receive_data(reply_to(m, p, encode_result_section(57)), 0)
    assert isinstance(event, ev.RequestFailed)
    assert isinstance(event.error, TransientNotCommitted)
    later = m.send(st.GetStreams(), 0)
    m.receive_data(reply_to(m, later), 0)
    assert m.queued_after(p)
    with pytest.raises(BusyError):
        m.retry(p, 1.0)


def test_eviction_and_deadlines_fail_every_request_in_flight() -> None:
    m = machine(max_in_flight=3)
    login(m)
    waiting = [m.send(st.GetStreams(), 0) for _ in range(3)]
    events = m.receive_data(encode_eviction(client=m.client_id, reason=13), 0)
    assert [e.request for e in events if isinstance(e, ev.RequestFailed)] == waiting
    assert isinstance(events[-1], ev.Evicted)
    assert isinstance(events[-1].error, StaleClient)

    m = machine(max_in_flight=2, request_timeout=10.0)
    login(m)
    m.send(st.GetStreams(), 0)
    short = m.send(sy.Ping(), 1.0, timeout=2.0)  # a later request with a shorter deadline
    assert m.next_deadline() == 3.0
    (timed_out,) = m.advance_time(3.0)
    assert isinstance(timed_out, ev.ReplyTimedOut)
    assert timed_out.request is short
    assert isinstance(m.error, RequestTimeout)
    assert m.in_flight == 0


def test_max_in_flight_is_validated() -> None:
    with pytest.raises(ConfigurationError):
        MachineSettings(max_in_flight=0)


# --- the driver -------------------------------------------------------------------------

PIPELINED = MachineSettings(request_timeout=5.0, heartbeat_interval=None, max_in_flight=3)


async def connect(server: Server) -> Connection:
    return await connect_with(server, PIPELINED)


async def test_submit_writes_without_waiting_and_resolves_in_order() -> None:
    server = Server()
    conn = await connect(server)
    names = ["a", "b", "c", "d"]
    futures = [await conn.submit(st.GetStream(Identifier(n))) for n in names[:3]]
    requests = [await server.next_request() for _ in range(3)]  # all three went out
    fourth = asyncio.create_task(conn.submit(st.GetStream(Identifier("d"))))
    await asyncio.sleep(0.01)
    assert not fourth.done()  # no room until a reply comes
    assert len(server.stream.frames) == 4  # login + 3
    for request, name in zip(requests, names, strict=False):
        record = st.StreamDetails(
            stream=st.StreamRecord(
                id=ord(name),
                created_at=1,
                topics_count=0,
                size_bytes=0,
                messages_count=0,
                name=name,
            ),
            topics=(),
        )
        server.reply(request, record.encode())
    results = [await f for f in futures]
    assert [r.stream.name for r in results if r is not None] == names[:3]
    last = await server.next_request()
    server.reply(last)
    assert await (await fourth) is None
    await conn.close(timeout=0.05)


async def test_a_request_that_goes_alone_waits_for_the_pipeline() -> None:
    server = Server()
    conn = await connect(server)
    read = await conn.submit(st.GetStreams())
    create = asyncio.create_task(conn.request(st.CreateStream(name="s1")))
    first = await server.next_request()
    await asyncio.sleep(0.01)
    assert len(server.stream.frames) == 2  # CreateStream waits for the read's reply
    server.reply(first, st.StreamsList().encode())
    assert await read == st.StreamsList()
    second = await server.next_request()
    assert second.operation == Operation.CREATE_STREAM
    with pytest.raises(ConfigurationError):
        await conn.submit(st.CreateStream(name="s2"))  # never pipelined
    server.reply(second, encode_result_section(1012))  # rejected: typed error, conn usable
    with pytest.raises(ServerError) as info:
        await create
    assert info.value.code == 1012
    assert conn.is_open
    await conn.close(timeout=0.05)


async def test_losing_the_connection_fails_every_request_in_flight() -> None:
    server = Server()
    conn = await connect(server)
    futures = [await conn.submit(sy.Ping()) for _ in range(3)]
    for _ in range(3):
        await server.next_request()
    server.stream.feed_eof()
    for future in futures:
        with pytest.raises(ConnectionClosed):
            await future
    await conn.close(timeout=0.05)


async def test_a_cancelled_submit_reply_is_dropped_and_the_rest_stay_in_step() -> None:
    server = Server()
    conn = await connect(server)
    first = await conn.submit(st.GetStreams())
    second = await conn.submit(st.GetStream(S1))
    r1, r2 = await server.next_request(), await server.next_request()
    first.cancel()
    server.reply(r1, st.StreamsList().encode())  # nobody waits: dropped
    server.reply(r2)
    assert await second is None
    assert conn.is_open
    assert conn.machine.in_flight == 0
    await conn.close(timeout=0.05)


async def test_a_submitted_request_rejected_as_transient_is_retried_when_nothing_followed() -> None:
    """submit()'s future passes the reply on by callback; a transient rejection (58) is
    retried with the same number when nothing was sent after the request."""
    server = Server()
    conn = await connect(server)
    future = await conn.submit(st.GetStreams())
    first = await server.next_request()
    server.reply(first, status=58)
    second = await server.next_request()
    assert (second.request, second.body) == (first.request, first.body)
    server.reply(second, st.StreamsList().encode())
    assert await future == st.StreamsList()
    assert conn.machine.in_flight == 0
    await conn.close(timeout=0.05)


async def test_a_transient_rejection_fails_a_submitted_request_when_another_followed() -> None:
    server = Server()
    conn = await connect(server)
    first = await conn.submit(st.GetStreams())
    second = await conn.submit(st.GetStream(S1))
    r1, r2 = await server.next_request(), await server.next_request()
    server.reply(r1, status=58)
    server.reply(r2)
    with pytest.raises(ServerError) as info:
        await first
    assert info.value.code == 58
    assert await second is None
    assert conn.is_open
    await conn.close(timeout=0.05)


async def test_cancelling_a_submitted_request_during_its_retry_drops_the_retry() -> None:
    server = Server()
    conn = await connect(server)
    future = await conn.submit(st.GetStreams())
    first = await server.next_request()
    server.reply(first, status=58)
    second = await server.next_request()  # the retry went out
    future.cancel()
    server.reply(second, st.StreamsList().encode())  # nobody waits: dropped
    read = await conn.submit(st.GetStream(S1))
    server.reply(await server.next_request())
    assert await read is None
    assert future.cancelled()
    assert conn.is_open
    await conn.close(timeout=0.05)
