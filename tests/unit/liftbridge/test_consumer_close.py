"""Closing a Liftbridge consumer lets go of its gRPC subscription calls.

A grpc.aio channel that is closed keeps its HTTP/2 connection (and socket) open while a call
object made on it is still referenced. Found by ``tests/integration/liftbridge/test_faults.py``
(a socket stayed open after ``Client.close()``), twice:

* the reader task ends cancelled on close, and a cancelled task keeps its traceback, whose
  frames hold the call: the consumer must drop the task;
* a broken subscription's error is chained to grpc's ``AioRpcError``, whose traceback holds
  the broken call through grpc's frames, in a reference cycle (only the garbage collector
  would free it): the chained error must not carry that traceback.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import grpc.aio
import pytest

from streamwire.codec.offset import Offset
from streamwire.errors import DecodeError
from streamwire.liftbridge._pb import api_pb2 as pb
from streamwire.liftbridge.consumer import Consumer, ConsumerOptions
from streamwire.transport.reconnect import ReconnectPolicy


class _Call:
    """Stands in for ``grpc.aio.UnaryStreamCall``: a stream that never delivers, or that
    delivers ``messages`` and then breaks as a cut connection does (UNAVAILABLE)."""

    def __init__(self, messages: list[pb.Message] | None = None, *, breaks: bool = False) -> None:
        self.cancelled = False
        self._messages = list(messages or [])
        self._breaks = breaks
        self._never = asyncio.Event()

    async def read(self) -> Any:
        if self._messages:
            return self._messages.pop(0)
        if self._breaks:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="connection reset",
            )
        await self._never.wait()

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class _Client:
    def __init__(self) -> None:
        self._children: set[Consumer] = set()
        self.reconnect = ReconnectPolicy(initial_delay=0)

    def _invalidate_metadata(self) -> None:
        pass

    async def _retry(
        self, attempt: Callable[[], Awaitable[Any]], cause: BaseException, *, what: str
    ) -> Any:
        return await attempt()


async def test_close_drops_every_reference_to_the_subscription_call() -> None:
    consumer = Consumer(_Client(), "s", options=ConsumerOptions())  # type: ignore[arg-type]
    call = _Call()
    consumer._call = call
    consumer._started = True
    consumer._reader = asyncio.create_task(consumer._read_loop())
    await asyncio.sleep(0)  # the reader waits in call.read()
    ref = weakref.ref(call)
    gc.disable()  # only plain references count: what the application holds keeps it alive
    try:
        await consumer.close()
        assert call.cancelled
        del call
        assert ref() is None, "the closed consumer still holds the gRPC call"
    finally:
        gc.enable()
    assert await consumer.next(timeout=0) is None  # closed: iteration is over


async def test_close_after_a_resubscription_drops_the_broken_call() -> None:
    consumer = Consumer(_Client(), "s", options=ConsumerOptions())  # type: ignore[arg-type]
    broken = _Call([pb.Message(offset=0, value=b"a")], breaks=True)
    fresh = _Call([pb.Message(offset=1, value=b"b")])
    asked: list[Offset] = []

    async def subscribe(start: Offset, resume: bool) -> _Call:
        asked.append(start)
        return fresh

    consumer._subscribe = subscribe  # type: ignore[method-assign]
    consumer._call = broken
    consumer._started = True
    consumer._reader = asyncio.create_task(consumer._read_loop())
    got = [await consumer.next(timeout=5), await consumer.next(timeout=5)]
    assert [m.value for m in got if m is not None] == [b"a", b"b"]
    assert asked == [Offset.at(1)]  # resubscribed right after the last message received
    assert consumer.resubscriptions == 1
    ref = weakref.ref(broken)
    gc.disable()
    try:
        await consumer.close()
        del broken
        assert ref() is None, "the closed consumer still holds the broken gRPC call"
    finally:
        gc.enable()


async def test_an_undecodable_message_fails_the_consumer_with_a_decode_error() -> None:
    """grpc.aio logs a message its deserializer refused and hands out ``None``: the consumer
    delivers what came before, then raises DecodeError (not an AttributeError)."""
    consumer = Consumer(_Client(), "s", options=ConsumerOptions())  # type: ignore[arg-type]
    consumer._call = _Call([pb.Message(offset=0, value=b"a"), None])  # type: ignore[list-item]
    consumer._started = True
    consumer._reader = asyncio.create_task(consumer._read_loop())
    first = await consumer.next(timeout=5)
    assert first is not None
    assert first.value == b"a"
    with pytest.raises(DecodeError, match="subscription"):
        await consumer.next(timeout=5)
    await consumer.close()
