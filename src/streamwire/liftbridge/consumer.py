"""Liftbridge consumer: one partition through a gRPC Subscribe stream.

A reader task reads the stream into a bounded local queue (``max_buffered_messages``); when
the queue is full the task stops reading, and gRPC's flow control holds the server back.
The server's first message on a subscription is an empty handshake, which ``start`` waits
for, so a subscription that cannot be made fails there (StreamNotFound, FailedPrecondition).

Resumption: when the stream breaks (leader gone, not the leader any more, partition closed
or paused), the consumer refreshes metadata and subscribes again at the leader, from the
offset after the last message it received, under the client's reconnect policy. With
``resume=True`` it also resumes a paused partition. A stop position (``stop_offset``,
``stop_latest``, ``stop_timestamp``) or the end of a readonly partition ends iteration.

Cursors: with a ``name``, :meth:`Consumer.commit` stores an offset on the server (SetCursor
on the ``__cursors`` partition's leader) and ``offset="next"`` resumes after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Self

import grpc
import grpc.aio

from streamwire.codec.message import Message, datetime_to_us
from streamwire.codec.offset import Offset, OffsetKind, OffsetLike
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectError,
    ConnectionClosed,
    DecodeError,
    RequestTimeout,
    StreamwireError,
)
from streamwire.liftbridge._grpc import translate
from streamwire.liftbridge._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import (
    FailedPrecondition,
    ResourceExhausted,
    StreamNotFound,
)
from streamwire.liftbridge.protocol.messages import to_message
from streamwire.liftbridge.protocol.metadata import subscribe_request
from streamwire.transport.backoff import Backoff
from streamwire.transport.deadline import Deadline
from streamwire.transport.resources import AsyncStartable

if TYPE_CHECKING:
    from streamwire.liftbridge.client import Client

__all__ = ("Consumer", "ConsumerOptions")

logger = logging.getLogger(__name__)


class _End:
    """Queued after the last message of a subscription that ended normally."""


_END: Final = _End()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOptions:
    max_buffered_messages: int = 1024
    """Messages read from the server but not yet handed out (the memory bound)."""
    resume: bool = False
    """Resume the partition if it is paused (when subscribing and resubscribing)."""
    read_isr_replica: bool = False
    """Read from a random in-sync replica instead of the leader."""
    stop_offset: int | None = None
    """End iteration after the message at this offset."""
    stop_latest: bool = False
    """End iteration at the newest message present when subscribing."""
    stop_timestamp: datetime | None = None
    """End iteration at the last message received before this time."""
    server_headers: bool = False
    """Keep the ``subject`` and ``reply`` headers the server adds to every message."""

    def __post_init__(self) -> None:
        if self.max_buffered_messages < 1:
            raise ConfigurationError("max_buffered_messages must be >= 1")
        stops = (self.stop_offset is not None, self.stop_latest, self.stop_timestamp is not None)
        if sum(stops) > 1:
            raise ConfigurationError("give at most one of stop_offset, stop_latest, stop_timestamp")


class Consumer(AsyncStartable):
    """Consumes one partition of a stream. ``async for message in consumer``."""

    def __init__(
        self,
        client: Client,
        stream: str,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        partition: int = 0,
        options: ConsumerOptions,
    ) -> None:
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigurationError("a consumer name must be a non-empty str")
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ConfigurationError(f"partition must be an int >= 0, got {partition!r}")
        self._client = client
        self.stream = stream
        self.partition = partition
        self.name = name
        self.options = options
        self.offset = Offset.parse(offset)
        self._start = self.offset  # ``next`` with a name resolved to the cursor, once started
        self._queue: asyncio.Queue[pb.Message | _End | StreamwireError] = asyncio.Queue(
            options.max_buffered_messages
        )
        self._call: grpc.aio.UnaryStreamCall[Any, Any] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._next_offset: int | None = None
        self._last_offset: int | None = None
        self._error: StreamwireError | None = None
        self._ended = False
        self._started = False
        self._closed = False
        self._progress = False
        self._skip_below = 0
        self._broken_since: float | None = None
        self._backoff: Backoff | None = None
        self.resubscriptions = 0
        """How often the subscription was made again after breaking."""

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Subscribe (at the partition leader) and wait for the server's handshake.

        Cancellation: the subscription, if made, is cancelled.
        """
        deadline = Deadline(timeout, exc_type=RequestTimeout, what=f"subscribing to {self}")
        async with deadline.scope():
            start = self._start = await self._resolve_start()
            try:
                self._call = await self._subscribe(start, self.options.resume)
            except (FailedPrecondition, ConnectError):
                # maybe a stale leader in the cached metadata: once more, freshly
                self._client._invalidate_metadata()
                self._call = await self._subscribe(start, self.options.resume)
        self._started = True
        self._reader = asyncio.create_task(self._read_loop(), name=f"streamwire {self}")
        return self

    def __str__(self) -> str:
        return f"{self.stream}/{self.partition}"

    def _is_started(self) -> bool:
        return bool(self._started)

    async def _resolve_start(self) -> Offset:
        """``next`` with a name resumes after the committed cursor."""
        if self.offset.kind is OffsetKind.NEXT and self.name:
            committed = await self.committed_offset()
            if committed is not None:
                return Offset.at(committed + 1)
        return self.offset

    def _request(self, start: Offset, resume: bool) -> pb.SubscribeRequest:
        opts = self.options
        stop_ts = None
        if opts.stop_timestamp is not None:
            stop_ts = datetime_to_us(opts.stop_timestamp) * 1000
        return subscribe_request(
            self.stream,
            self.partition,
            start,
            stop_offset=opts.stop_offset,
            stop_latest=opts.stop_latest,
            stop_timestamp_ns=stop_ts,
            read_isr_replica=opts.read_isr_replica,
            resume=resume,
        )

    async def _subscribe(self, start: Offset, resume: bool) -> grpc.aio.UnaryStreamCall[Any, Any]:
        request = self._request(start, resume)
        # Asked for an offset beyond the high watermark, the server (v1.9.0) starts at the
        # watermark + 1 instead of waiting for the offset: drop what comes before it.
        self._skip_below = (start.value or 0) if start.kind is OffsetKind.OFFSET else 0
        channel = await self._client._partition_channel(
            self.stream, self.partition, any_replica=self.options.read_isr_replica
        )
        call = self._client._channels_or_fail().subscribe(channel, request)
        try:
            async with asyncio.timeout(self._client.request_timeout):
                first = await call.read()
        except grpc.aio.AioRpcError as exc:
            raise translate(exc, f"subscribing to {self}") from exc
        except TimeoutError as exc:
            call.cancel()
            raise RequestTimeout(f"subscribing to {self}: no handshake in time") from exc
        except BaseException:
            call.cancel()
            raise
        if first is grpc.aio.EOF:
            raise ConnectionClosed(f"subscribing to {self}: the stream ended at once")
        return call

    # --- the reader task ---------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                call = self._call
                if call is None:
                    return
                outcome = await self._pump(call)
                if outcome is None:
                    return
                if not await self._resubscribe(outcome):
                    return
        except asyncio.CancelledError:
            raise
        except StreamwireError as exc:
            await self._queue.put(exc)
        except Exception as exc:  # a bug or a foreign error: fail the consumer, loudly
            logger.exception("consumer %s failed", self)
            await self._queue.put(ConnectionClosed(f"consumer {self} failed: {exc!r}"))

    async def _pump(self, call: grpc.aio.UnaryStreamCall[Any, Any]) -> StreamwireError | None:
        """Move messages into the queue until the stream ends. Returns the error to recover
        from, or None when the subscription is over (the end marker is queued)."""
        put = self._queue.put
        try:
            while True:
                msg = await call.read()
                if msg is grpc.aio.EOF:
                    await put(_END)
                    return None
                if msg is None:  # grpc logs an undecodable message and hands out None
                    await put(DecodeError("liftbridge.Message", frame=f"the subscription {self}"))
                    return None
                if msg.offset < self._skip_below:
                    continue
                self._next_offset = msg.offset + 1
                self._progress = True
                await put(msg)
        except grpc.aio.AioRpcError as exc:
            err = translate(exc, f"subscription to {self}")
            if isinstance(err, ResourceExhausted):  # stop position or end of readonly
                await put(_END)
                return None
            # Without grpc's traceback: its frames hold the broken call (in a reference cycle
            # through this frame), and a live call keeps its channel's connection open.
            err.__cause__ = exc.with_traceback(None)
            return err

    async def _resubscribe(self, cause: StreamwireError) -> bool:
        """Subscribe again after a broken stream; False when giving up (error queued).

        A subscription that breaks again before delivering anything (a paused partition
        accepts subscriptions and closes them at once) waits for the policy's growing
        backoff first, and gives up after ``max_elapsed`` seconds without progress.
        """
        self._call = None
        policy = self._client.reconnect
        retriable = not isinstance(cause, StreamNotFound | ClosedError)
        if self._closed or not retriable or policy is None:
            await self._queue.put(cause)
            return False
        now = asyncio.get_running_loop().time()
        if self._progress or self._broken_since is None or self._backoff is None:
            self._broken_since, self._backoff = now, policy.backoff()
        else:
            if policy.max_elapsed is not None and now - self._broken_since >= policy.max_elapsed:
                gave_up = ConnectionClosed(f"subscription to {self} keeps breaking: {cause}")
                gave_up.__cause__ = cause
                await self._queue.put(gave_up)
                return False
            await asyncio.sleep(next(self._backoff, policy.max_delay))
        self._progress = False
        logger.info("subscription to %s broke (%s); subscribing again", self, cause)
        resume_at = self._start if self._next_offset is None else Offset.at(self._next_offset)

        async def attempt() -> grpc.aio.UnaryStreamCall[Any, Any]:
            self._client._invalidate_metadata()
            return await self._subscribe(resume_at, self.options.resume)

        try:
            self._call = await self._client._retry(attempt, cause, what=f"consumer of {self}")
        except StreamwireError as exc:
            await self._queue.put(exc)
            return False
        self.resubscriptions += 1
        return True

    # --- consuming ---------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Message]:
        return self

    def _take(self, item: pb.Message | _End | StreamwireError) -> Message | None:
        if isinstance(item, _End):
            self._ended = True
            return None
        if isinstance(item, StreamwireError):
            self._error = item
            raise item
        msg = to_message(item, server_headers=self.options.server_headers)
        self._last_offset = msg.offset
        return msg

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if not self._started and not self._closed:
            raise ClosedError("consumer not started: use 'async with' or 'await'")

    async def __anext__(self) -> Message:
        """The next message. Iteration ends when the consumer is closed or reaches its stop
        position; a failure is raised.

        Cancellation: nothing is lost; the message stays queued.
        """
        msg = await self.next(None)
        if msg is None:
            raise StopAsyncIteration
        return msg

    async def next(self, timeout: float | None = None) -> Message | None:
        """The next message, or ``None`` if none arrived within ``timeout`` or the
        subscription is over.

        Cancellation: nothing is lost.
        """
        self._check()
        if self._ended or (self._closed and self._queue.empty()):
            return None
        try:
            async with asyncio.timeout(timeout):
                item = await self._queue.get()
        except TimeoutError:
            return None
        return self._take(item)

    async def next_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[Message]:
        """Up to ``max_messages`` messages: whatever is queued, else what arrives first
        within ``timeout`` (an empty list if nothing did).

        Cancellation: nothing is lost.
        """
        out: list[Message] = []
        if self._queue.empty():
            first = await self.next(timeout)
            if first is None:
                return out
            out.append(first)
        get = self._queue.get_nowait
        while len(out) < max_messages and not self._queue.empty() and not self._ended:
            item = get()
            if isinstance(item, StreamwireError) and out:
                self._error = item  # raised on the next call; deliver what we have
                break
            msg = self._take(item)
            if msg is None:
                break
            out.append(msg)
        return out

    # --- cursors -----------------------------------------------------------------------

    async def commit(self, offset: int | None = None, *, timeout: float | None = None) -> None:
        """Store ``offset`` (default: the last message handed out) as this consumer's
        cursor; ``offset="next"`` later resumes after it.

        Cancellation: the cursor may or may not have been stored.
        """
        if self.name is None:
            raise ConfigurationError("commit() needs a consumer name")
        offset = self._last_offset if offset is None else offset
        if offset is None:
            return
        await self._client.set_cursor(
            self.stream, self.partition, self.name, offset, timeout=timeout
        )

    async def committed_offset(self, *, timeout: float | None = None) -> int | None:
        """The offset stored under the consumer name (``None`` if none)."""
        if self.name is None:
            raise ConfigurationError("committed_offset() needs a consumer name")
        return await self._client.fetch_cursor(
            self.stream, self.partition, self.name, timeout=timeout
        )

    @property
    def last_offset(self) -> int | None:
        """Offset of the last message handed out."""
        return self._last_offset

    # --- closing -----------------------------------------------------------------------

    async def close(self) -> None:
        """Cancel the subscription and stop. Idempotent; messages already queued can still
        be read with ``next``/``next_batch``.

        Cancellation: the subscription is cancelled anyway.
        """
        if self._closed:
            return
        self._closed = True
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        # Let go of the task: a cancelled task keeps its traceback, whose frames hold the gRPC
        # call, and grpc keeps a call's HTTP/2 connection open even after the channel closed.
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.cancel()
            await asyncio.wait({reader})  # a cancellation of close() itself still propagates
            if not reader.cancelled() and reader.exception() is not None:
                logger.debug("consumer %s reader ended with %r", self, reader.exception())
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(_END)
        self._client._children.discard(self)
