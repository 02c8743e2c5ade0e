"""Sending, polling and consumer offsets (docs/protocol/iggy.md §5.6–§5.9).

SendMessages carries routing metadata (behind its own length) and one message batch
(:mod:`.batch`); its reply lists ``(stream, topic, partition, base_offset)`` per appended
batch. A poll reply is ``[partition u32][current_offset u64][count u32]`` followed by batch
records until the body ends.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final

from streamwire.codec._structs import BytesLike
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.errors import DecodeError
from streamwire.iggy.protocol._wire import (
    BOOL,
    U8,
    U32,
    U64,
    Counted,
    Nested,
    Payload,
    RequestPayload,
    wire,
)
from streamwire.iggy.protocol.batch import (
    FrameRef,
    StoredMessage,
    bytes_view,
    locate_frames,
    stored_messages,
)
from streamwire.iggy.protocol.constants import HEADER_SIZE, U32_MAX, AckLevel, Command
from streamwire.iggy.protocol.framing import Framable
from streamwire.iggy.protocol.identifiers import (
    CONSUMER,
    IDENT,
    OPT_PARTITION,
    PARTITIONING,
    STRATEGY,
    Consumer,
    Identifier,
    Partitioning,
    PollingStrategy,
)

__all__ = (
    "RESYNC_PARTITION",
    "ConsumerOffsetInfo",
    "DeleteConsumerOffset",
    "FlushUnsavedBuffer",
    "GetConsumerOffset",
    "PollMessages",
    "PolledMessages",
    "SendConfirmation",
    "SendConfirmations",
    "SendMessages",
    "StoreConsumerOffset",
)

RESYNC_PARTITION: Final = U32_MAX
"""Poll reply partition id that, with zero messages, means "group assignment changed"."""

_U32LE: Final = struct.Struct("<I")


@dataclass(frozen=True, slots=True, kw_only=True)
class SendConfirmation(Payload):
    stream_id: int = field(metadata=wire(U32))
    topic_id: int = field(metadata=wire(U32))
    partition_id: int = field(metadata=wire(U32))
    base_offset: int = field(metadata=wire(U64))


@dataclass(frozen=True, slots=True, kw_only=True)
class SendConfirmations(Payload):
    """SendMessages reply; empty for a duplicate request (nothing confirmed)."""

    confirmations: tuple[SendConfirmation, ...] = field(
        default=(), metadata=wire(Counted(Nested(SendConfirmation), 20))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SendMessages(RequestPayload[SendConfirmations]):
    """Code 101 (operation 160): ``[metadata_length u32][stream][topic][partitioning]
    [messages_count u32][batch]``; ``metadata_length`` covers the four fields after it."""

    command: ClassVar = Command.SEND_MESSAGES
    reply: ClassVar = SendConfirmations

    stream: Identifier
    topic: Identifier
    partitioning: Partitioning
    messages_count: int
    batch: bytes | bytearray = field(repr=False)
    room: int = 0
    """Bytes free in front of the batch in ``batch`` (the batch is ``batch[room:]``): with
    room for the request header and the metadata, the frame is written around the batch
    without copying it (:class:`~streamwire.iggy.protocol.framing.Framable`)."""

    @staticmethod
    def room_for(stream: Identifier, topic: Identifier, partitioning: Partitioning) -> int:
        """The room a batch needs in front of it for the frame of a SendMessages to these."""
        w = Writer()
        SendMessages(
            stream=stream, topic=topic, partitioning=partitioning, messages_count=0, batch=b""
        )._write_metadata(w)
        return HEADER_SIZE + len(w)

    def write(self, w: Writer) -> None:
        self._write_metadata(w)
        w.raw(memoryview(self.batch)[self.room :] if self.room else self.batch)

    def _write_metadata(self, w: Writer) -> None:
        at = len(w)
        w.u32le(0)
        IDENT.write(w, self.stream)
        IDENT.write(w, self.topic)
        PARTITIONING.write(w, self.partitioning)
        w.u32le(self.messages_count)
        w.patch(at, _U32LE, len(w) - at - 4)

    def encode_parts(self) -> tuple[BytesLike, ...] | Framable:
        w = Writer()
        self._write_metadata(w)
        meta = w.getvalue()
        at = self.room - len(meta)
        if isinstance(self.batch, bytearray) and at >= HEADER_SIZE:
            self.batch[at : self.room] = meta
            return Framable(self.batch, at)
        return (meta, memoryview(self.batch)[self.room :] if self.room else self.batch)

    @classmethod
    def read(cls, r: Reader) -> SendMessages:
        pos = r.pos
        meta = r.sub(r.u32le(), "send metadata")
        stream, topic = IDENT.read(meta), IDENT.read(meta)
        partitioning = PARTITIONING.read(meta)
        count = meta.u32le()
        if not meta.at_end():
            raise r.error("send metadata length does not match its fields", pos)
        return cls(
            stream=stream,
            topic=topic,
            partitioning=partitioning,
            messages_count=count,
            batch=bytes(r.rest()),
        )

    def parse_reply(self, body: BytesLike) -> SendConfirmations:
        return SendConfirmations.decode(body) if body else SendConfirmations()


@dataclass(frozen=True, slots=True, kw_only=True)
class PolledMessages(Payload):
    """Poll reply. ``records`` holds the batch records as received (decoded from a frame in
    ``bytes``: a read-only view of that frame, not a copy) and ``frames`` where each
    message lies in them (checked for structure when the reply is decoded, so a malformed
    reply fails the connection); :attr:`messages` decodes them into objects on demand, and
    :func:`streamwire.iggy.protocol.mapping.received_messages` straight into
    :class:`~streamwire.codec.message.Message` objects."""

    partition_id: int
    current_offset: int
    messages_count: int
    records: bytes | memoryview = field(default=b"", repr=False)
    frames: Sequence[FrameRef] = field(default=(), compare=False, repr=False)

    @classmethod
    def build(
        cls, partition_id: int, current_offset: int, records: Sequence[bytes]
    ) -> PolledMessages:
        """A reply over stored batch records (server side)."""
        data = b"".join(records)
        frames = locate_frames(data, frame="poll reply")
        return cls(
            partition_id=partition_id,
            current_offset=current_offset,
            messages_count=len(frames),
            records=data,
            frames=frames,
        )

    @property
    def messages(self) -> list[StoredMessage]:
        """The decoded messages (absolute offsets), in order; a new list on each access."""
        return stored_messages(self.records, self.frames)

    @property
    def needs_resync(self) -> bool:
        """A group member's assignment changed: sync the group again."""
        return self.partition_id == RESYNC_PARTITION and not self.messages_count

    def write(self, w: Writer) -> None:
        w.u32le(self.partition_id).u64le(self.current_offset).u32le(self.messages_count)
        w.raw(self.records)

    @classmethod
    def read(cls, r: Reader) -> PolledMessages:
        partition_id, current, count = r.u32le(), r.u64le(), r.u32le()
        start = r.pos
        rest = r.rest()  # a view of the received frame (bytes), copied otherwise
        records: bytes | memoryview = rest if bytes_view(rest) else bytes(rest)
        try:
            frames = locate_frames(records, frame="poll reply")
        except DecodeError as exc:
            raise r.error(exc.what, start + (exc.offset or 0)) from None
        if len(frames) != count:
            raise r.error(f"poll reply announces {count} messages but carries {len(frames)}")
        return cls(
            partition_id=partition_id,
            current_offset=current,
            messages_count=count,
            records=records,
            frames=frames,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PollMessages(RequestPayload[PolledMessages]):
    """Code 100: ``[consumer][stream][topic][partition flag+id][strategy][count u32]
    [auto_commit u8]``."""

    command: ClassVar = Command.POLL_MESSAGES
    reply: ClassVar = PolledMessages

    consumer: Consumer = field(metadata=wire(CONSUMER))
    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    partition: int | None = field(metadata=wire(OPT_PARTITION))
    strategy: PollingStrategy = field(metadata=wire(STRATEGY))
    count: int = field(metadata=wire(U32))
    auto_commit: bool = field(default=False, metadata=wire(BOOL))

    def parse_reply(self, body: BytesLike) -> PolledMessages:
        if not body:
            return PolledMessages(partition_id=0, current_offset=0, messages_count=0)
        return PolledMessages.decode(body)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOffsetInfo(Payload):
    partition_id: int = field(metadata=wire(U32))
    current_offset: int = field(metadata=wire(U64))
    stored_offset: int = field(metadata=wire(U64))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsumerOffset(RequestPayload["ConsumerOffsetInfo | None"]):
    """Code 120; an empty reply means no offset is stored."""

    command: ClassVar = Command.GET_CONSUMER_OFFSET
    reply: ClassVar = ConsumerOffsetInfo
    empty_is_none: ClassVar = True

    consumer: Consumer = field(metadata=wire(CONSUMER))
    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    partition: int | None = field(metadata=wire(OPT_PARTITION))


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreConsumerOffset(RequestPayload[None]):
    """Code 121 (operation 161); the trailing ack byte is mandatory in 0.9."""

    command: ClassVar = Command.STORE_CONSUMER_OFFSET

    consumer: Consumer = field(metadata=wire(CONSUMER))
    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    partition: int | None = field(metadata=wire(OPT_PARTITION))
    offset: int = field(metadata=wire(U64))
    ack: int = field(default=AckLevel.QUORUM, metadata=wire(U8))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteConsumerOffset(RequestPayload[None]):
    """Code 122 (operation 162)."""

    command: ClassVar = Command.DELETE_CONSUMER_OFFSET

    consumer: Consumer = field(metadata=wire(CONSUMER))
    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    partition: int | None = field(metadata=wire(OPT_PARTITION))
    ack: int = field(default=AckLevel.QUORUM, metadata=wire(U8))


@dataclass(frozen=True, slots=True, kw_only=True)
class FlushUnsavedBuffer(RequestPayload[None]):
    """Code 102: a 0.9 server always answers FeatureUnavailable (5)."""

    command: ClassVar = Command.FLUSH_UNSAVED_BUFFER

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    partition_id: int = field(metadata=wire(U32))
    fsync: bool = field(default=False, metadata=wire(BOOL))
