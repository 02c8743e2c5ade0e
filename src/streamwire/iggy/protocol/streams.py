"""Streams, topics, partitions and segments (docs/protocol/iggy.md §3, §5.3, §5.4).

Requests carry their options block to the end of the body; records in replies carry
length-prefixed option blocks. Topic replies (GET_TOPIC, CREATE_TOPIC) are the topic header
followed by ``partitions_count`` partition records; GET_STREAM is a stream record followed by
``topics_count`` topic headers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from streamwire.codec.headers import HeaderValue
from streamwire.codec.reader import Reader
from streamwire.codec.writer import Writer
from streamwire.iggy.protocol._wire import (
    NAME,
    U8,
    U32,
    U64,
    Counted,
    Nested,
    Payload,
    RequestPayload,
    ToEnd,
    wire,
)
from streamwire.iggy.protocol.constants import Command
from streamwire.iggy.protocol.identifiers import IDENT, Identifier
from streamwire.iggy.protocol.tlv import OPTIONS32, OPTIONS_REST

__all__ = (
    "CreatePartitions",
    "CreateStream",
    "CreateTopic",
    "DeletePartitions",
    "DeleteSegments",
    "DeleteStream",
    "DeleteTopic",
    "GetStream",
    "GetStreams",
    "GetTopic",
    "GetTopics",
    "PartitionRecord",
    "PurgeStream",
    "PurgeTopic",
    "StreamDetails",
    "StreamRecord",
    "StreamsList",
    "TopicDetails",
    "TopicRecord",
    "TopicsList",
    "UpdateStream",
    "UpdateTopic",
)

Options = dict[str, HeaderValue]


def _options() -> Options:
    return {}


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamRecord(Payload):
    id: int = field(metadata=wire(U32))
    created_at: int = field(metadata=wire(U64))
    topics_count: int = field(metadata=wire(U32))
    size_bytes: int = field(metadata=wire(U64))
    messages_count: int = field(metadata=wire(U64))
    name: str = field(metadata=wire(NAME))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS32))


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord(Payload):
    """Topic header: fixed fields (name at offset 49), then explicit and derived options."""

    id: int = field(metadata=wire(U32))
    created_at: int = field(metadata=wire(U64))
    partitions_count: int = field(metadata=wire(U32))
    message_expiry: int = field(metadata=wire(U64))
    compression_algorithm: int = field(metadata=wire(U8))
    max_topic_size: int = field(metadata=wire(U64))
    size_bytes: int = field(metadata=wire(U64))
    messages_count: int = field(metadata=wire(U64))
    name: str = field(metadata=wire(NAME))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS32))
    derived_options: Options = field(default_factory=_options, metadata=wire(OPTIONS32))


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord(Payload):
    """40 bytes: id, created_at, segments_count, current_offset, size_bytes, messages."""

    id: int = field(metadata=wire(U32))
    created_at: int = field(metadata=wire(U64))
    segments_count: int = field(metadata=wire(U32))
    current_offset: int = field(metadata=wire(U64))
    size_bytes: int = field(metadata=wire(U64))
    messages_count: int = field(metadata=wire(U64))


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDetails(Payload):
    """A topic header followed by exactly ``partitions_count`` partition records."""

    topic: TopicRecord
    partitions: tuple[PartitionRecord, ...] = ()

    def write(self, w: Writer) -> None:
        self.topic.write(w)
        for partition in self.partitions:
            partition.write(w)

    @classmethod
    def read(cls, r: Reader) -> TopicDetails:
        topic = TopicRecord.read(r)
        if topic.partitions_count * 40 > r.remaining:
            raise r.error(f"{topic.partitions_count} partitions")
        parts = tuple(PartitionRecord.read(r) for _ in range(topic.partitions_count))
        return cls(topic=topic, partitions=parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamDetails(Payload):
    """A stream record followed by exactly ``topics_count`` topic headers."""

    stream: StreamRecord
    topics: tuple[TopicRecord, ...] = ()

    def write(self, w: Writer) -> None:
        self.stream.write(w)
        for topic in self.topics:
            topic.write(w)

    @classmethod
    def read(cls, r: Reader) -> StreamDetails:
        stream = StreamRecord.read(r)
        if stream.topics_count * 58 > r.remaining:
            raise r.error(f"{stream.topics_count} topics")
        return cls(
            stream=stream, topics=tuple(TopicRecord.read(r) for _ in range(stream.topics_count))
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsList(Payload):
    streams: tuple[StreamRecord, ...] = field(
        default=(), metadata=wire(ToEnd(Nested(StreamRecord)))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicsList(Payload):
    """GET_TOPICS reply: the one list with a count prefix."""

    topics: tuple[TopicRecord, ...] = field(
        default=(), metadata=wire(Counted(Nested(TopicRecord), 58))
    )


# --- streams ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetStream(RequestPayload["StreamDetails | None"]):
    command: ClassVar = Command.GET_STREAM
    reply: ClassVar = StreamDetails
    empty_is_none: ClassVar = True

    stream: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True)
class GetStreams(RequestPayload[StreamsList]):
    command: ClassVar = Command.GET_STREAMS
    reply: ClassVar = StreamsList


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateStream(RequestPayload[StreamRecord]):
    command: ClassVar = Command.CREATE_STREAM
    reply: ClassVar = StreamRecord

    name: str = field(metadata=wire(NAME))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS_REST))


@dataclass(frozen=True, slots=True)
class DeleteStream(RequestPayload[None]):
    command: ClassVar = Command.DELETE_STREAM

    stream: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateStream(RequestPayload[None]):
    command: ClassVar = Command.UPDATE_STREAM

    stream: Identifier = field(metadata=wire(IDENT))
    name: str = field(metadata=wire(NAME))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS_REST))


@dataclass(frozen=True, slots=True)
class PurgeStream(RequestPayload[None]):
    command: ClassVar = Command.PURGE_STREAM

    stream: Identifier = field(metadata=wire(IDENT))


# --- topics ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetTopic(RequestPayload["TopicDetails | None"]):
    command: ClassVar = Command.GET_TOPIC
    reply: ClassVar = TopicDetails
    empty_is_none: ClassVar = True

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True)
class GetTopics(RequestPayload[TopicsList]):
    command: ClassVar = Command.GET_TOPICS
    reply: ClassVar = TopicsList

    stream: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopic(RequestPayload[TopicDetails]):
    """``[stream][partitions_count u32][name][options to end]``."""

    command: ClassVar = Command.CREATE_TOPIC
    reply: ClassVar = TopicDetails

    stream: Identifier = field(metadata=wire(IDENT))
    partitions_count: int = field(metadata=wire(U32))
    name: str = field(metadata=wire(NAME))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS_REST))


@dataclass(frozen=True, slots=True)
class DeleteTopic(RequestPayload[None]):
    command: ClassVar = Command.DELETE_TOPIC

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateTopic(RequestPayload[None]):
    """Only compression_algorithm, message_expiry and max_topic_size are updatable."""

    command: ClassVar = Command.UPDATE_TOPIC

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    name: str = field(metadata=wire(NAME))
    options: Options = field(default_factory=_options, metadata=wire(OPTIONS_REST))


@dataclass(frozen=True, slots=True)
class PurgeTopic(RequestPayload[None]):
    command: ClassVar = Command.PURGE_TOPIC

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))


# --- partitions and segments -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatePartitions(RequestPayload[None]):
    """Adds partitions (max 1000 per request); the reply body is ignored, as the SDK does."""

    command: ClassVar = Command.CREATE_PARTITIONS

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    partitions_count: int = field(metadata=wire(U32))


@dataclass(frozen=True, slots=True)
class DeletePartitions(RequestPayload[None]):
    """Removes the last ``partitions_count`` partitions."""

    command: ClassVar = Command.DELETE_PARTITIONS

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    partitions_count: int = field(metadata=wire(U32))


@dataclass(frozen=True, slots=True)
class DeleteSegments(RequestPayload[None]):
    """Deletes the ``segments_count`` oldest sealed segments of a partition."""

    command: ClassVar = Command.DELETE_SEGMENTS

    stream: Identifier = field(metadata=wire(IDENT))
    topic: Identifier = field(metadata=wire(IDENT))
    partition_id: int = field(metadata=wire(U32))
    segments_count: int = field(metadata=wire(U32))
