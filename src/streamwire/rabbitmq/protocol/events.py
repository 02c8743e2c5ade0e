"""Events the RabbitMQ Streams machine reports, named in the past tense."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamwire.errors import StreamwireError
from streamwire.rabbitmq.protocol._frame import Frame

__all__ = (
    "ChunkDelivered",
    "CloseRequested",
    "ConnectionClosedByPeer",
    "ConnectionOpened",
    "ConsumerUpdateRequested",
    "CreditFailed",
    "Event",
    "HandshakeFailed",
    "MetadataChanged",
    "PeerWentSilent",
    "PublishConfirmed",
    "PublishErrored",
    "ResponseReceived",
)


class Event:
    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConnectionOpened(Event):
    server_properties: dict[str, str]
    connection_properties: dict[str, str]
    frame_max: int
    heartbeat: int
    command_versions: dict[int, tuple[int, int]]
    """Command key → (min, max) version the broker accepts; empty before 3.11."""


@dataclass(frozen=True, slots=True)
class HandshakeFailed(Event):
    error: StreamwireError


@dataclass(frozen=True, slots=True)
class ResponseReceived(Event):
    """A response to a request the driver sent; match it by ``correlation_id``."""

    correlation_id: int
    frame: Frame


@dataclass(frozen=True, slots=True)
class PublishConfirmed(Event):
    publisher_id: int
    publishing_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PublishErrored(Event):
    publisher_id: int
    errors: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class ChunkDelivered(Event):
    subscription_id: int
    chunk: bytes | memoryview = field(repr=False)
    committed_chunk_id: int | None


@dataclass(frozen=True, slots=True)
class MetadataChanged(Event):
    stream: str
    code: int


@dataclass(frozen=True, slots=True)
class CreditFailed(Event):
    subscription_id: int
    code: int


@dataclass(frozen=True, slots=True)
class ConsumerUpdateRequested(Event):
    """Single active consumer: answer with :meth:`StreamsConnection.answer_consumer_update`."""

    correlation_id: int
    subscription_id: int
    active: bool


@dataclass(frozen=True, slots=True)
class CloseRequested(Event):
    """The broker closed the connection (the machine has answered it)."""

    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class ConnectionClosedByPeer(Event):
    """End of stream, without a Close frame, or after our own Close was answered."""

    expected: bool


@dataclass(frozen=True, slots=True)
class PeerWentSilent(Event):
    """Nothing arrived for two heartbeat intervals: the connection must be dropped."""

    silent_for: float
