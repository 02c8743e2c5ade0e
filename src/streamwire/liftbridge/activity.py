"""Liftbridge's activity stream as typed events (docs/liftbridge.md, "The activity stream").

A server started with ``activity.stream.enabled: true`` records every stream and consumer
group operation of the cluster in the stream ``__activity`` (one partition), one protobuf
``ActivityStreamEvent`` per message. :meth:`streamwire.liftbridge.Client.activity_stream`
subscribes to it with an ordinary consumer (so the consumer's failover, reconnect and cursors
apply: ``name=`` with ``offset="next"`` resumes after the last event :meth:`ActivityStream.commit`
stored) and hands out :class:`ActivityEvent` values.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Final, Protocol, Self

from google.protobuf.message import DecodeError as ProtobufDecodeError

from streamwire.codec.message import Message
from streamwire.errors import DecodeError
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.transport.resources import AsyncStartable

__all__ = ("ACTIVITY_STREAM", "ActivityEvent", "ActivityOp", "ActivityStream", "decode_event")

ACTIVITY_STREAM: Final = "__activity"
"""The stream a Liftbridge cluster writes its activity to."""


class ActivityOp(IntEnum):
    """What happened (``ActivityStreamOp`` in Liftbridge's api.proto)."""

    CREATE_STREAM = 0
    DELETE_STREAM = 1
    PAUSE_STREAM = 2
    RESUME_STREAM = 3
    SET_STREAM_READONLY = 4
    JOIN_CONSUMER_GROUP = 5
    LEAVE_CONSUMER_GROUP = 6


@dataclass(frozen=True, slots=True)
class ActivityEvent:
    """One entry of the activity stream. ``offset`` is where it is in ``__activity`` (what
    :meth:`ActivityStream.commit` stores), ``id`` the server's own event id. The other fields
    are those of ``op``'s record, empty or ``None`` for the others:

    * stream operations: ``stream`` and ``partitions`` (the partitions concerned; for a pause,
      ``resume_all`` says whether publishing to one resumes them all; for a readonly change,
      ``readonly`` the new flag);
    * consumer group operations: ``group_id`` and ``consumer_id`` (a join lists the group's
      ``streams``; a leave says whether the member ``expired``, removed for not answering).
    """

    offset: int
    id: int
    op: ActivityOp
    stream: str | None = None
    partitions: tuple[int, ...] = ()
    resume_all: bool = False
    readonly: bool | None = None
    group_id: str | None = None
    consumer_id: str | None = None
    streams: tuple[str, ...] = ()
    expired: bool = False


def decode_event(message: Message) -> ActivityEvent:
    """The event a message of ``__activity`` carries; :class:`DecodeError` when its value is
    not an ``ActivityStreamEvent`` or names an operation this client does not know."""
    offset = message.offset if message.offset is not None else -1
    try:
        raw = pb.ActivityStreamEvent.FromString(message.value)
    except ProtobufDecodeError as exc:
        raise DecodeError(f"activity event at offset {offset}: {exc}") from None
    try:
        op = ActivityOp(raw.op)
    except ValueError:
        raise DecodeError(
            f"activity event at offset {offset}: unknown operation {raw.op}"
        ) from None
    base = ActivityEvent(offset, int(raw.id), op)
    if op is ActivityOp.CREATE_STREAM:
        c = raw.createStreamOp
        return replace(base, stream=c.stream, partitions=tuple(c.partitions))
    if op is ActivityOp.DELETE_STREAM:
        return replace(base, stream=raw.deleteStreamOp.stream)
    if op is ActivityOp.PAUSE_STREAM:
        p = raw.pauseStreamOp
        return replace(
            base, stream=p.stream, partitions=tuple(p.partitions), resume_all=p.resumeAll
        )
    if op is ActivityOp.RESUME_STREAM:
        r = raw.resumeStreamOp
        return replace(base, stream=r.stream, partitions=tuple(r.partitions))
    if op is ActivityOp.SET_STREAM_READONLY:
        s = raw.setStreamReadonlyOp
        return replace(base, stream=s.stream, partitions=tuple(s.partitions), readonly=s.readonly)
    if op is ActivityOp.JOIN_CONSUMER_GROUP:
        j = raw.joinConsumerGroupOp
        return replace(base, group_id=j.groupId, consumer_id=j.consumerId, streams=tuple(j.streams))
    leave = raw.leaveConsumerGroupOp
    return replace(
        base, group_id=leave.groupId, consumer_id=leave.consumerId, expired=leave.expired
    )


class _Reader(Protocol):
    """What :class:`ActivityStream` needs of the consumer under it (a Liftbridge
    ``Consumer`` of ``__activity``): a narrow interface, so this module imports no client."""

    async def start(self) -> object: ...

    def _is_started(self) -> bool: ...

    async def __anext__(self) -> Message: ...

    async def next_batch(self, max_messages: int, timeout: float | None) -> list[Message]: ...

    async def commit(self, offset: int | None = None) -> None: ...

    async def close(self) -> None: ...


class ActivityStream(AsyncStartable):
    """The activity stream as an async iterator of :class:`ActivityEvent`; ``async with`` it
    (or ``await`` it, then :meth:`close`). Made by
    :meth:`streamwire.liftbridge.Client.activity_stream`."""

    def __init__(self, consumer: _Reader) -> None:
        self._consumer = consumer
        self._last: int | None = None  # offset of the last event handed out
        self._last_id = -1  # its id: ids only grow, and a repeat is the same event again

    async def start(self) -> Self:
        """Subscribe to ``__activity`` (raises the consumer's errors: ``StreamNotFound`` when
        the cluster does not record its activity)."""
        await self._consumer.start()
        return self

    def _is_started(self) -> bool:
        return self._consumer._is_started()

    def __aiter__(self) -> AsyncIterator[ActivityEvent]:
        return self

    async def __anext__(self) -> ActivityEvent:
        while True:
            event = decode_event(await self._consumer.__anext__())
            if self._fresh(event):
                return event

    async def next_batch(
        self, max_events: int = 100, *, timeout: float | None = None
    ) -> list[ActivityEvent]:
        """Up to ``max_events`` events, waiting at most ``timeout`` seconds for the first
        (an empty list when none came)."""
        messages = await self._consumer.next_batch(max_events, timeout)
        return [e for e in map(decode_event, messages) if self._fresh(e)]

    def _fresh(self, event: ActivityEvent) -> bool:
        """Whether ``event`` is new: the server records an event at least once, and the same
        event again carries the same id (seen on v1.9.0: the creation of ``__activity``
        itself at offsets 0 and 1), while every new one has a larger id."""
        if event.id <= self._last_id:
            return False
        self._last_id = event.id
        self._last = event.offset
        return True

    async def commit(self, event: ActivityEvent | None = None) -> None:
        """Store ``event``'s offset (default: the last event handed out) under the stream's
        ``name``; ``offset="next"`` with that name later resumes after it."""
        offset = self._last if event is None else event.offset
        if offset is not None:
            await self._consumer.commit(offset)

    async def close(self) -> None:
        """End the subscription. Idempotent."""
        await self._consumer.close()
