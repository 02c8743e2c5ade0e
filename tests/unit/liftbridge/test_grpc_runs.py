"""The gRPC publish path's ack runs: ``PublishAsync`` responses settled into the ledgers of
runs, consecutive ones by range. First the publisher alone with fabricated responses (any
order, gaps in offsets, two runs interleaved, errors, duplicates, a deadline, failing what
waits); then a producer against an in-process server that answers as each test scripts
(offsets and errors per message over two partitions, a connection lost mid-batch,
cancellation, ``max_in_flight``), over both ``publish_transport``s."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import grpc
import grpc.aio
import pytest

import streamwire
import streamwire.liftbridge as lb
from streamwire import Message
from streamwire.codec.message import Confirmation
from streamwire.errors import ConfigurationError, ConnectionClosed, StreamwireError
from streamwire.liftbridge import AckTimeout, IncorrectOffset
from streamwire.liftbridge._acks import AckRun
from streamwire.liftbridge._grpc_publish import GrpcPublisher
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import AckError, FailedPrecondition
from streamwire.transport.pending import Ledger
from tests.proxy import wait_until
from tests.unit.liftbridge.fake_api import dead_port, start_api

Settled = list[tuple[int, BaseException | None]]
E = pb.PublishAsyncError


async def publisher_with_run(
    n: int, *, partition: int = 3, timeout: float | None = 30.0
) -> tuple[GrpcPublisher, AckRun, Settled]:
    publisher = GrpcPublisher(cast(Any, None), "orders", request_timeout=None)
    run, settled = add_run(publisher, n, partition=partition, timeout=timeout)
    return publisher, run, settled


def add_run(
    publisher: GrpcPublisher, n: int, *, partition: int = 3, timeout: float | None = 30.0
) -> tuple[AckRun, Settled]:
    ledger = Ledger(asyncio.get_running_loop(), n, "orders", offsets=True)
    ledger.partition = partition
    settled: Settled = []

    def on_settled(run: AckRun, count: int, exc: BaseException | None) -> None:
        settled.append((count, exc))

    cids = publisher.next_ids(n)
    run = AckRun(cids, ledger, on_settled, payloads=[c.encode() for c in cids])
    publisher.expect_run(run, timeout, f"a message to orders/{partition} over gRPC")
    return run, settled


def ok(cid: str, offset: int) -> pb.PublishResponse:
    return pb.PublishResponse(correlationId=cid, ack=pb.Ack(stream="orders", offset=offset))


def offsets(run: AckRun) -> list[int | None]:
    return [f.result().offset for f in run.ledger.futures()]


async def test_consecutive_responses_are_confirmed_as_one_range() -> None:
    publisher, run, settled = await publisher_with_run(5)
    publisher._settle([ok(cid, 40 + i) for i, cid in enumerate(run.cids)])
    assert [f.result() for f in run.ledger.futures()] == [
        Confirmation(None, 40 + i, "orders", 3) for i in range(5)
    ]
    assert settled == [(5, None)]  # the run is told once
    assert publisher.pending == 0
    assert publisher.acks.stats.acks == 5


async def test_any_order_gaps_and_two_runs_interleaved_each_get_their_own_offset() -> None:
    publisher, a, settled_a = await publisher_with_run(4)
    b, settled_b = add_run(publisher, 3, partition=1)
    responses = [
        ok(a.cids[0], 10),
        ok(a.cids[1], 11),
        ok(a.cids[2], 15),  # a gap in the offsets
        ok(b.cids[0], 7),  # another run in between
        ok(a.cids[3], 16),
        ok(b.cids[2], 9),  # out of order
        ok(b.cids[1], 8),
    ]
    publisher._settle(responses)
    assert offsets(a) == [10, 11, 15, 16]
    assert offsets(b) == [7, 8, 9]
    assert [f.result().partition for f in b.ledger.futures()] == [1, 1, 1]
    assert sum(n for n, _ in settled_a) == 4
    assert sum(n for n, _ in settled_b) == 3
    assert all(exc is None for _, exc in settled_a + settled_b)
    assert publisher.pending == 0


async def test_an_error_response_fails_only_its_message() -> None:
    publisher, run, settled = await publisher_with_run(5)
    c = run.cids
    refused = pb.PublishResponse(
        correlationId=c[2],
        asyncError=pb.PublishAsyncError(code=E.INCORRECT_OFFSET, message="incorrect"),
        ack=pb.Ack(),  # v1.9.0 sends an empty ack beside the error
    )
    too_large = pb.PublishResponse(
        correlationId=c[4], ack=pb.Ack(stream="orders", ackError=pb.Ack.TOO_LARGE)
    )
    publisher._settle([ok(c[0], 0), ok(c[1], 1), refused, ok(c[3], 2), too_large])
    futures = run.ledger.futures()
    assert [futures[i].result().offset for i in (0, 1, 3)] == [0, 1, 2]
    error = futures[2].exception()
    assert isinstance(error, IncorrectOffset)
    assert f"message {c[2]} to orders/3" in str(error)
    assert isinstance(futures[4].exception(), AckError)
    assert sum(n for n, _ in settled) == 5
    assert [exc for _, exc in settled if exc is not None] == [error, futures[4].exception()]
    assert publisher.acks.stats.error_acks == 2


async def test_duplicates_unknown_ids_and_a_response_without_an_ack() -> None:
    publisher, run, settled = await publisher_with_run(2)
    c = run.cids
    publisher._settle(
        [ok(c[0], 5), ok(c[0], 6), ok("ffff", 1), pb.PublishResponse(correlationId=c[1])]
    )
    assert offsets(run) == [5, None]  # the first response wins; no ack: no offset
    assert publisher.acks.stats.unmatched == 2
    assert settled == [(1, None), (1, None)]


async def test_a_run_past_its_deadline_fails_what_is_missing_and_a_late_response_is_dropped() -> (
    None
):
    publisher, run, settled = await publisher_with_run(3, timeout=0.05)
    publisher._settle([ok(run.cids[0], 0)])
    futures = run.ledger.futures()
    with pytest.raises(AckTimeout, match=f"correlation id {run.cids[1]}"):
        await asyncio.wait_for(futures[1], 10)
    assert isinstance(futures[2].exception(), AckTimeout)
    assert futures[0].result().offset == 0
    publisher._settle([ok(run.cids[2], 2)])
    assert isinstance(futures[2].exception(), AckTimeout)
    assert publisher.acks.stats.unmatched == 1
    assert sum(n for n, _ in settled) == 3


async def test_failing_what_waits_gives_each_message_its_own_error() -> None:
    publisher, run, _ = await publisher_with_run(3)
    publisher._settle([ok(run.cids[1], 9)])
    assert [r[0] for r in publisher._waiting()] == [run.cids[0], run.cids[2]]
    publisher.acks.fail_all(ConnectionClosed("gone"))
    futures = run.ledger.futures()
    first, last = futures[0].exception(), futures[2].exception()
    assert isinstance(first, ConnectionClosed)
    assert isinstance(last, ConnectionClosed)
    assert first is not last
    assert futures[1].result().offset == 9
    assert publisher.pending == 0


# --- a producer against a scripted server --------------------------------------------------

Answer = Callable[[pb.PublishRequest, int], pb.PublishResponse | None]
"""What the server answers to a request (and its index on the stream); None: nothing."""


class ScriptedServer:
    """FetchMetadata (stream ``orders`` with ``partitions``) and PublishAsync answering each
    request with ``answer``; ``cut_after`` requests into the first stream that carries
    any (the producer's start probe carries none) it aborts it."""

    def __init__(self, answer: Answer, *, partitions: int = 1, cut_after: int | None = None):
        self.answer = answer
        self.partitions = partitions
        self.cut_after = cut_after
        self.received: list[pb.PublishRequest] = []
        self.server = grpc.aio.server()
        self.port = 0
        self.streams = 0
        """Streams that carried a request."""

    def metadata(self, request: pb.FetchMetadataRequest, context: Any) -> Any:
        response = pb.FetchMetadataResponse(
            brokers=[pb.Broker(id="b1", host="127.0.0.1", port=self.port)]
        )
        meta = response.streamMetadata.add(name="orders", subject="orders")
        for p in range(self.partitions):
            meta.partitions[p].CopyFrom(pb.PartitionMetadata(id=p, leader="b1"))
        return response

    async def publish_async(self, requests: Any, context: Any) -> AsyncIterator[Any]:
        n = 0
        async for request in requests:
            self.received.append(request)
            if not n:
                self.streams += 1
            first = self.streams == 1
            n += 1
            if first and self.cut_after is not None and n > self.cut_after:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "cut (scripted)")
            response = self.answer(request, len(self.received) - 1)
            if response is not None:
                yield response


@pytest.fixture(params=["http2", "grpcio"])
async def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def producer_for(
    server: ScriptedServer, transport: str, **options: Any
) -> tuple[lb.Client, lb.Producer]:
    server.port = await start_api(
        server.server,
        {"FetchMetadata": server.metadata},
        {"PublishAsync": server.publish_async},
    )
    url = f"liftbridge://127.0.0.1:{server.port}?nats=nats://127.0.0.1:{dead_port()}"
    client = await lb.connect(
        url,
        timeout=5,
        require_nats=False,
        reconnect=options.pop("reconnect", None),
        publish_transport=transport,
    )
    producer = await client.producer("orders", transport="grpc", **options).start()
    return client, producer


def by_value(request: pb.PublishRequest, at: int) -> pb.PublishResponse | None:
    """Ack at offset 1000 × partition + the value's number; ``bad`` values are refused."""
    value = request.value.decode()
    if value.startswith("bad"):
        error = pb.PublishAsyncError(code=E.READONLY, message="readonly partition")
        return pb.PublishResponse(correlationId=request.correlationId, asyncError=error)
    offset = 1000 * request.partition + int(value.removeprefix("m"))
    ack = pb.Ack(stream=request.stream, offset=offset)
    return pb.PublishResponse(correlationId=request.correlationId, ack=ack)


async def test_send_batch_over_two_partitions_confirms_each_message_with_its_offset(
    transport: str,
) -> None:
    server = ScriptedServer(by_value, partitions=2)
    client, producer = await producer_for(server, transport, partitioner="round_robin")
    try:
        values = [b"m0", b"m1", b"bad2", b"m3", b"m4", b"m5"]
        futures = await producer.send_batch(values)
        done, _ = await asyncio.wait(futures, timeout=10)
        assert len(done) == len(values)
        assert [r.partition for r in server.received] == [0, 1, 0, 1, 0, 1]
        got = [f.result() if not f.exception() else type(f.exception()) for f in futures]
        assert got == [
            Confirmation(None, 0, "orders", 0),
            Confirmation(None, 1001, "orders", 1),
            FailedPrecondition,
            Confirmation(None, 1003, "orders", 1),
            Confirmation(None, 4, "orders", 0),
            Confirmation(None, 1005, "orders", 1),
        ]
        with pytest.raises(FailedPrecondition):
            await producer.flush(10)
        assert producer.pending == 0
        assert producer.stats.confirmed == 5
        assert producer.stats.failed == 1
        one = await producer.send_and_wait(b"m7", partition=1, timeout=10)
        assert one == Confirmation(None, 1007, "orders", 1)
        assert server.received[-1].correlationId  # hand-encoded, as the generated class
        assert server.received[-1].ackPolicy == pb.AckPolicy.LEADER
        assert server.received[-1].expectedOffset == -1
    finally:
        await client.close()
        await server.server.stop(None)


async def test_a_pinned_producer_sends_everything_to_its_partition_and_routes_keys_as_unpinned(
    transport: str,
) -> None:
    server = ScriptedServer(by_value, partitions=2)
    client, producer = await producer_for(server, transport, partition=1)
    try:
        assert isinstance(producer, streamwire.KeyRouted)
        assert producer.partition_count == 2
        await producer.send_batch([b"m0", b"m1", Message(b"m2", key=b"k")])
        await producer.flush(10)
        assert [r.partition for r in server.received] == [1, 1, 1]
        # where a key goes when nothing is pinned: go-liftbridge's CRC-32 rule
        assert [producer.partition_for_key(k) for k in (b"a", b"b", b"key-7")] == [
            zlib.crc32(k) % 2 for k in (b"a", b"b", b"key-7")
        ]
        with pytest.raises(ConfigurationError, match="partition must be"):
            client.producer("orders", partition=-1)
        with pytest.raises(ConfigurationError, match="not 2"):
            await client.producer("orders", transport="grpc", partition=2).start()
        rr = await client.producer("orders", transport="grpc", partitioner="round_robin").start()
        with pytest.raises(ConfigurationError, match="round_robin"):
            rr.partition_for_key(b"a")
        await rr.close()
    finally:
        await client.close()
        await server.server.stop(None)


async def test_a_connection_lost_mid_batch_fails_exactly_what_waited(transport: str) -> None:
    server = ScriptedServer(by_value, cut_after=3)
    client, producer = await producer_for(server, transport)
    try:
        futures = await producer.send_batch([f"m{i}".encode() for i in range(8)])
        await asyncio.wait(futures, timeout=10)
        assert all(f.done() for f in futures)
        confirmed = [f for f in futures if f.exception() is None]
        if transport == "http2":  # every response that arrived before the status is read
            assert len(confirmed) == 3
        else:
            # grpc.aio: a write that fails once the server's status is in poisons the call
            # (status INTERNAL), and responses grpc held but had not handed over are dropped
            # (docs/liftbridge.md, "A stream that breaks"): some of the three may fail
            assert len(confirmed) <= 3
        assert futures[: len(confirmed)] == confirmed  # confirmed: a prefix, at its offsets
        assert [f.result().offset for f in confirmed] == list(range(len(confirmed)))
        for f in futures[len(confirmed) :]:
            assert isinstance(f.exception(), StreamwireError)
        assert producer.pending == 0
        assert producer.stats.confirmed == len(confirmed)
        assert producer.stats.failed == 8 - len(confirmed)
        assert server.streams == 1  # (reconnect=None: nothing sent again)
    finally:
        await client.close()
        await server.server.stop(None)


async def test_max_in_flight_bounds_what_waits_and_a_cancelled_batch_raises(
    transport: str,
) -> None:
    server = ScriptedServer(lambda request, at: None)  # never answers
    client, producer = await producer_for(server, transport, max_in_flight=4, ack_timeout=None)
    try:
        first = await producer.send_batch([f"m{i}".encode() for i in range(4)])
        assert producer.pending == 4
        blocked = asyncio.ensure_future(producer.send_batch([b"m4", b"m5"], timeout=30))
        await wait_until(lambda: len(server.received) == 4, 10, "the first four arrived")
        await asyncio.sleep(0.05)  # (the blocked batch had time to send, and did not)
        assert not blocked.done()
        assert producer.pending == 4
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
        assert producer.pending == 4  # the cancelled batch queued nothing
        assert len(server.received) == 4
        assert all(not f.done() for f in first)
        await producer.close(flush=False)
    finally:
        await client.close()
        await server.server.stop(None)
    assert all(isinstance(f.exception(), StreamwireError) for f in first)
