"""Liftbridge consumer: one partition through a gRPC Subscribe stream.

The stream is read off the event loop: a thread per subscription iterates it over grpc's
synchronous API, decodes each message and appends it to a bounded buffer shared with the
loop (``max_buffered_messages``, see ``_stream_reader``). When the buffer is full the
thread waits, and gRPC's flow control holds the server back. The thread wakes the loop only
when a task waits for a message and no wake-up is pending, so a busy loop takes many
messages per wake-up instead of one message per iteration. An asyncio task follows each
subscription's end and resubscribes.

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
import logging
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Self

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
from streamwire.liftbridge._grpc import RpcFailed, translate
from streamwire.liftbridge._h2_subscription import AnySubscription
from streamwire.liftbridge._link import ConsumerLink
from streamwire.liftbridge._stream_reader import (
    STOPPED,
    UNDECODABLE,
    Handover,
    OffsetRegression,
    Outcome,
    handshake,
)
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import (
    FailedPrecondition,
    ResourceExhausted,
    StreamNotFound,
)
from streamwire.liftbridge.protocol.metadata import subscribe_request
from streamwire.metrics import ConsumerMeter, ConsumerStats, Destination
from streamwire.transport.backoff import Backoff
from streamwire.transport.deadline import Deadline
from streamwire.transport.ready import NATIVE_PAYS, ready_iterator
from streamwire.transport.resources import AsyncStartable

__all__ = ("Consumer", "ConsumerOptions")

logger = logging.getLogger(__name__)


class _End:
    """Queued after the last message of a subscription that ended normally."""


_END: Final = _End()

_Item = Message | _End | StreamwireError

#: How long closing (or a failed subscribe) waits for a reading thread to end after
#: cancelling its call; it normally takes a millisecond.
_REFILL: Final = 256
"""Messages ``next`` and ``async for`` move from the hand-over to the local queue at once."""
_JOIN_TIMEOUT: Final = 5.0
_READER_STOP_TIMEOUT: Final = 10.0  # what close() waits for its cancelled reader task


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOptions:
    max_buffered_messages: int = 1024
    """Messages read from the server but not yet handed out (the memory bound): the reading
    thread waits while this many are buffered."""
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
        client: ConsumerLink,
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
        # Messages from the reading threads, then the end marker or the error that ends
        # consumption (``finish``); ``_handover.wakeups`` counts the loop's wake-ups.
        self._handover: Handover[_Item] = Handover(options.max_buffered_messages)
        self._subscription: AnySubscription | None = None
        self._reader: asyncio.Task[None] | None = None  # follows subscriptions, resubscribes
        self._next_offset: int | None = None
        self._last_offset: int | None = None
        # messages taken from the hand-over and not handed out yet (``next``, ``async for``)
        self._ready: deque[Message] = deque()
        self._error: StreamwireError | None = None
        self._ended = False
        self._started = False
        self._closed = False
        self._progress = False
        self._broken_since: float | None = None
        self._backoff: Backoff | None = None
        self.resubscriptions = 0
        """How often the subscription was made again after breaking."""
        self._meter = ConsumerMeter(
            Destination("liftbridge", stream, f"{client.host}:{client.port}")
        )
        self._bytes_counted = 0  # of the handover's received_bytes

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Subscribe (at the partition leader) and wait for the server's handshake.

        Cancellation: the subscription, if made, is cancelled and its thread ended.
        """
        deadline = Deadline(timeout, exc_type=RequestTimeout, what=f"subscribing to {self}")
        async with deadline.scope():
            start = self._start = await self._resolve_start()
            try:
                self._subscription = await self._subscribe(start, self.options.resume)
            except (FailedPrecondition, ConnectError):
                # maybe a stale leader in the cached metadata: once more, freshly
                self._client._invalidate_metadata()
                self._subscription = await self._subscribe(start, self.options.resume)
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

    async def _subscribe(self, start: Offset, resume: bool) -> AnySubscription:
        """Open a subscription, start its reading thread and wait for the handshake.

        Cancellation (or a failure): the call is cancelled and the thread ended.
        """
        request = self._request(start, resume)
        sub = await self._client._subscription(
            request,
            self._handover,
            # Asked for an offset beyond the high watermark, the server (v1.9.0) starts at
            # the watermark + 1 instead of waiting for the offset: drop what comes before it.
            skip_below=(start.value or 0) if start.kind is OffsetKind.OFFSET else 0,
            server_headers=self.options.server_headers,
            any_replica=self.options.read_isr_replica,
        )
        return await handshake(
            sub,
            timeout=self._client.request_timeout,
            what=f"subscribing to {self}",
            end=lambda: self._end(sub),
        )

    # --- the reader task ---------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                sub = self._subscription
                if sub is None:
                    return
                outcome = await asyncio.shield(sub.finished)
                await self._end(sub)  # the thread is ending: leave none behind
                self._subscription = None
                cause = self._settle(outcome)
                if cause is None:
                    return
                if not await self._resubscribe(cause):
                    return
        except asyncio.CancelledError:
            raise
        except StreamwireError as exc:
            self._handover.finish(exc)
        except Exception as exc:  # a bug or a foreign error: fail the consumer, loudly
            logger.exception("consumer %s failed", self)
            self._handover.finish(ConnectionClosed(f"consumer {self} failed: {exc!r}"))

    async def _end(self, sub: AnySubscription) -> None:
        """Stop ``sub``'s thread (bounded) and take over where it got to, so that a
        resubscription starts right after the last message it handed over."""
        await sub.stop(_JOIN_TIMEOUT)
        if sub.next_offset is not None:
            self._next_offset = sub.next_offset
        if sub.delivered:
            self._progress = True

    def _settle(self, outcome: Outcome) -> StreamwireError | None:
        """After a subscription ended: the error to recover from by resubscribing, or None
        when consumption is over (the end marker or the error is queued, or closing)."""
        if outcome is STOPPED:
            return None
        if outcome is UNDECODABLE:
            what = f"the subscription {self}"
            self._handover.finish(DecodeError("liftbridge.Message", frame=what))
            return None
        if isinstance(outcome, OffsetRegression):
            error = outcome.error(f"consumer {self}", self.stream, self.partition)
            self._handover.finish(error)
            return None
        if isinstance(outcome, RpcFailed):
            err = translate(outcome, f"subscription to {self}")
            if isinstance(err, ResourceExhausted):  # stop position or end of readonly
                self._handover.finish(_END)
                return None
            err.__cause__ = outcome  # grpc's status, not the call: that would stay alive
            return err
        if isinstance(outcome, Exception):  # a bug in the reading thread: fail, loudly
            logger.error("consumer %s: its reading thread failed", self, exc_info=outcome)
            self._handover.finish(ConnectionClosed(f"consumer {self} failed: {outcome!r}"))
            return None
        self._handover.finish(_END)  # ENDED: the server ended the stream
        return None

    async def _resubscribe(self, cause: StreamwireError) -> bool:
        """Subscribe again after a broken stream; False when giving up (error queued).

        A subscription that breaks again before delivering anything (a paused partition
        accepts subscriptions and closes them at once) waits for the policy's growing
        backoff first, and gives up after ``max_elapsed`` seconds without progress.
        """
        self._subscription = None
        policy = self._client.reconnect
        retriable = not isinstance(cause, StreamNotFound | ClosedError)
        if self._closed or not retriable or policy is None:
            self._handover.finish(cause)
            return False
        now = asyncio.get_running_loop().time()
        if self._progress or self._broken_since is None or self._backoff is None:
            self._broken_since, self._backoff = now, policy.backoff()
        else:
            if policy.max_elapsed is not None and now - self._broken_since >= policy.max_elapsed:
                gave_up = ConnectionClosed(f"subscription to {self} keeps breaking: {cause}")
                gave_up.__cause__ = cause
                self._handover.finish(gave_up)
                return False
            await asyncio.sleep(next(self._backoff, policy.max_delay))
        self._progress = False
        logger.info("subscription to %s broke (%s); subscribing again", self, cause)
        resume_at = self._start if self._next_offset is None else Offset.at(self._next_offset)

        async def attempt() -> AnySubscription:
            self._client._invalidate_metadata()
            return await self._subscribe(resume_at, self.options.resume)

        try:
            self._subscription = await self._client._retry(
                attempt, cause, what=f"consumer of {self}"
            )
        except StreamwireError as exc:
            self._handover.finish(exc)
            return False
        self.resubscriptions += 1
        return True

    # --- consuming ---------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Message]:
        """``async for``: queued messages without a coroutine each (with the native core on
        Python 3.11, :mod:`streamwire.transport.ready`), else :meth:`__anext__`."""
        if not NATIVE_PAYS:
            return self
        return ready_iterator(self._ready, self, "_last_offset", "offset", self.__anext__)

    def _take(self, item: _Item) -> Message | None:
        if isinstance(item, Message):
            self._last_offset = item.offset
            return item
        if isinstance(item, _End):
            self._ended = True
            return None
        self._error = item
        raise item

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
        ready = self._ready
        if not ready and not await self._refill(None):
            raise StopAsyncIteration
        msg = ready.popleft()
        self._last_offset = msg.offset
        return msg

    async def next(self, timeout: float | None = None) -> Message | None:
        """The next message, or ``None`` if none arrived within ``timeout`` or the
        subscription is over.

        Cancellation: nothing is lost.
        """
        ready = self._ready
        if not ready and not await self._refill(timeout):
            return None
        msg = ready.popleft()
        self._last_offset = msg.offset
        return msg

    async def _refill(self, timeout: float | None) -> bool:
        """Move up to :data:`_REFILL` messages from the hand-over to the local queue, waiting
        up to ``timeout`` for the first; whether the queue has one now. One lock, one
        room notification and one meter update per run of messages instead of per message
        (they count as consumed when they move here; the local queue adds at most
        :data:`_REFILL` to ``max_buffered_messages``). The end comes after the messages
        before it; an error is raised once they are handed out.

        Cancellation: nothing is taken (``Handover.get``)."""
        self._check()
        if self._ended or (self._closed and not self._handover.ready()):
            return False
        items = await self._handover.get(_REFILL, timeout)
        ready = self._ready
        for item in items:
            if isinstance(item, Message):
                ready.append(item)
            elif isinstance(item, _End):
                self._ended = True
            else:
                self._error = item
        if ready:
            self._handed_out(len(ready), ready[-1])
            return True
        if self._error is not None:
            raise self._error
        return False

    def _handed_out(self, count: int, last: Message, *, more: bool = False) -> None:
        received = self._handover.received_bytes
        nbytes, self._bytes_counted = received - self._bytes_counted, received
        self._meter.received(count, nbytes, last.offset, self.partition, more=more)

    async def next_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[Message]:
        """Up to ``max_messages`` messages: whatever is queued, else what arrives first
        within ``timeout`` (an empty list if nothing did).

        Cancellation: nothing is lost.
        """
        ready = self._ready
        if ready:  # left by next() or async for: counted already
            out = [ready.popleft() for _ in range(min(max_messages, len(ready)))]
            self._last_offset = out[-1].offset
            return out
        out = []
        if not self._handover.ready():
            if not await self._refill(timeout):
                return out
            out = [ready.popleft() for _ in range(min(max_messages, len(ready)))]
            self._last_offset = out[-1].offset
            if ready:
                return out
        if self._error is None and not self._ended and len(out) < max_messages:
            counted = len(out)
            for item in self._handover.take(max_messages - len(out)):  # the end/error: last
                if isinstance(item, StreamwireError) and out:
                    self._error = item  # raised on the next call; deliver what we have
                    break
                msg = self._take(item)
                if msg is None:
                    break
                out.append(msg)
            if len(out) > counted:
                self._handed_out(len(out) - counted, out[-1])
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
        self._meter.committed(offset)

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

    @property
    def stats(self) -> ConsumerStats:
        """Counters of what this consumer received. ``lag`` is ``None``: Liftbridge's
        messages and subscriptions do not carry the partition's high watermark (ask
        ``client.partition_metadata`` for it)."""
        return self._meter.snapshot()

    # --- closing -----------------------------------------------------------------------

    async def close(self) -> None:
        """Cancel the subscription, end its reading thread (within a few seconds at most)
        and stop. Idempotent; messages already queued can still be read with
        ``next``/``next_batch``.

        Cancellation: the subscription is cancelled anyway; its thread ends on its own.
        """
        if self._closed:
            return
        self._closed = True
        sub = self._subscription
        if sub is not None:
            sub.cancel()  # the thread starts ending now
        try:
            # Let go of the task: a cancelled task keeps its traceback, whose frames hold
            # what the task held.
            reader, self._reader = self._reader, None
            if reader is not None and not reader.done():
                reader.cancel()
                # bounded: a task that loses its cancellation must not hold close() (a
                # cancellation of close() itself propagates)
                await asyncio.wait({reader}, timeout=_READER_STOP_TIMEOUT)
                if not reader.done():
                    logger.warning(
                        "consumer %s: its reader did not stop within %s s; left to end alone",
                        self,
                        _READER_STOP_TIMEOUT,
                    )
                elif not reader.cancelled() and reader.exception() is not None:
                    logger.debug("consumer %s reader ended with %r", self, reader.exception())
            # the one cancelled above, or one the reader made meanwhile
            sub, self._subscription = self._subscription, None
            if sub is not None:
                await self._end(sub)
        finally:
            self._subscription = None
            self._handover.finish(_END)
            self._client._forget_child(self)
