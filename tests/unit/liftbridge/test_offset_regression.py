"""A Liftbridge server that sends an offset again: records its log holds past its index (a
crash between its log write and its index write, docs/liftbridge.md "After a crash") come
first under offsets it then gives to later messages. The consumer hands out what came
before and fails with ``UnindexedRecordsError`` naming those offsets, over both subscribe
transports (the scripted gRPC server of ``test_consumer_close``); offsets that skip (a
compacted log) move forward and are no error. ``_regression``, the HTTP/2 path's check of a
batch, is tested on its own for where in a batch it finds the offset."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

import streamwire
from streamwire.codec.message import Message
from streamwire.liftbridge._h2_subscription import H2Subscription, _regression
from streamwire.liftbridge._stream_reader import Handover, OffsetRegression
from streamwire.liftbridge.protocol.messages import decode_message
from streamwire.transport import h2grpc
from tests.unit.liftbridge.test_consumer_close import (
    BUDGET,
    Call,
    FakeApi,
    client_of,
    handshake,
    message,
    started,
    subscribe_transport,  # noqa: F401  (the autouse fixture: both transports)
)


def served(offsets: list[int]) -> Iterator[bytes]:
    yield handshake()
    for n, offset in enumerate(offsets):
        yield message(offset, b"v%d" % n)


async def read_all(offsets: list[int]) -> tuple[list[Message], BaseException | None]:
    """What a consumer hands out of a subscription sending ``offsets`` (then nothing), and
    the error it ends with (None if it read them all)."""

    def script(call: Call) -> Iterator[bytes]:
        yield from served(offsets)
        yield from call.hang()

    got: list[Message] = []
    with FakeApi([script]) as api:
        async with client_of(api) as client:
            consumer = await started(client)
            try:
                while len(got) < len(offsets):
                    msg = await consumer.next(timeout=BUDGET)
                    assert msg is not None, f"nothing after {len(got)} messages"
                    got.append(msg)
            except streamwire.UnindexedRecordsError as exc:
                return got, exc
            finally:
                await consumer.close()
    return got, None


async def test_an_offset_sent_again_fails_the_consumer_after_what_came_before() -> None:
    # 0..9 indexed, 10..14 unindexed records, then 10.. again: what the server now reports
    offsets = [*range(15), *range(10, 13)]
    got, error = await read_all(offsets)
    assert [m.offset for m in got] == list(range(15))
    assert [m.value for m in got] == [b"v%d" % n for n in range(15)]
    assert isinstance(error, streamwire.UnindexedRecordsError)
    assert (error.stream, error.partition, error.first, error.count) == ("s", 0, 10, 5)
    assert "sent offset 10 after offset 14" in str(error)
    assert "Read from offset 10 on" in str(error)
    again = pickle.loads(pickle.dumps(error))  # noqa: S301  (our own bytes)
    assert (again.first, again.count, str(again)) == (10, 5, str(error))


async def test_offsets_that_skip_forward_are_read_without_an_error() -> None:
    offsets = [0, 2, 3, 7, 8, 20, 21, 22, 40]  # a compacted log
    got, error = await read_all(offsets)
    assert error is None
    assert [m.offset for m in got] == offsets


def batch(offsets: list[int]) -> list[Message]:
    return [decode_message(message(o), server_headers=False) for o in offsets]


@pytest.mark.parametrize(
    ("offsets", "expected", "at"),
    [
        ([5, 6, 7], None, None),  # consecutive, the first batch
        ([5, 6, 7], 5, None),  # consecutive, after 0..4
        ([5, 9, 30], 5, None),  # skipping forward
        ([3, 4, 5], 5, 0),  # its first before where the last batch ended
        ([5, 6, 7, 6, 7], 5, 3),  # within the batch
        ([5, 9, 8, 10], None, 2),  # within a batch that also skips
        ([5, 5], None, 1),  # the same offset twice
    ],
)
def test_regression_finds_the_first_offset_not_past_the_one_before(
    offsets: list[int], expected: int | None, at: int | None
) -> None:
    assert _regression(batch(offsets), expected) == at


class _EarlyCall:
    """A call whose messages reached the subscription before ``open_call`` returned it (the
    server's SETTINGS, the handshake and the messages in one read, as on a slow machine);
    it ends only when cancelled, as a server that then says nothing."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ended: asyncio.Future[h2grpc.CallEnded] = loop.create_future()
        self.failure: Exception | None = None
        self.cancels = 0

    def cancel(self) -> None:
        self.cancels += 1
        if not self.ended.done():
            self.ended.set_result(h2grpc.CallEnded(h2grpc.Status.CANCELLED, "cancelled"))

    def credit_owed(self) -> bool:
        return False


async def test_an_offset_sent_again_before_the_call_is_open_still_ends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    handover: Handover[Any] = Handover(1000)
    sub = H2Subscription(
        handover,
        host="127.0.0.1",
        port=1,
        request=b"",
        ssl_context=None,
        server_hostname=None,
        loop=loop,
        skip_below=0,
        server_headers=False,
        name="s/0",
    )
    call = _EarlyCall(loop)

    async def open_call(*args: object, **kwargs: object) -> _EarlyCall:
        sub.deliver(batch([0, *range(15), *range(10, 13)]), 100)  # the first: the handshake
        return call

    monkeypatch.setattr(h2grpc, "open_call", open_call)
    assert await sub.connect(timeout=BUDGET)
    sub.start()
    outcome = await asyncio.wait_for(asyncio.shield(sub.finished), BUDGET)
    assert isinstance(outcome, OffsetRegression), outcome
    assert (outcome.expected, outcome.offset) == (15, 10)
    assert call.cancels >= 1
    assert [m.offset for m in handover.take(100)] == list(range(15))
    await sub.stop(BUDGET)
