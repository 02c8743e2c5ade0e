"""Events the Iggy connection machine reports, named in the past tense."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from streamwire.codec._structs import BytesLike
from streamwire.errors import RemoteProtocolError, ServerError, StreamwireError
from streamwire.iggy.protocol._wire import RequestPayload
from streamwire.iggy.protocol.constants import Command, Operation

__all__ = (
    "ConnectionClosedByPeer",
    "Event",
    "Evicted",
    "HeartbeatDue",
    "LoggedIn",
    "PendingRequest",
    "ProtocolFailed",
    "ReplyReceived",
    "ReplyTimedOut",
    "RequestFailed",
)


class Event:
    __slots__ = ()


@dataclass(eq=False, slots=True, kw_only=True)
class PendingRequest:
    """A request that was queued and awaits its reply."""

    payload: RequestPayload[Any]
    command: Command
    operation: Operation
    request: int
    sent_at: float
    deadline: float
    frame: BytesLike = field(repr=False)
    attempts: int = 1
    seq: int = 0
    """Position in the connection's sending order (retries get a new one)."""
    stamp: int = 0
    """The timestamp field sent (0, or ``seq`` when queued behind a request with the same
    number): a server echoes it, which tells such requests' replies apart."""


@dataclass(frozen=True, slots=True)
class ReplyReceived(Event):
    """The reply to ``request``; ``result`` is what its payload class parsed."""

    request: PendingRequest
    result: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class RequestFailed(Event):
    """The server refused ``request`` (reply status or a committed rejection)."""

    request: PendingRequest
    error: StreamwireError


@dataclass(frozen=True, slots=True)
class LoggedIn(Event):
    user_id: int
    session: int
    server_protocol_version: int
    server_version: str


@dataclass(frozen=True, slots=True)
class Evicted(Event):
    """The server ended the session (docs/protocol/iggy.md §2.6); the connection is unusable."""

    reason: int
    error: ServerError


@dataclass(frozen=True, slots=True)
class ProtocolFailed(Event):
    """The server broke the protocol; the connection is unusable."""

    error: RemoteProtocolError


@dataclass(frozen=True, slots=True)
class ReplyTimedOut(Event):
    """No reply within the request's deadline. The stream may be out of step (the server
    drops malformed requests without a reply), so the connection is unusable."""

    request: PendingRequest
    waited: float


@dataclass(frozen=True, slots=True)
class HeartbeatDue(Event):
    """The connection was idle for a heartbeat interval: send a Ping."""


@dataclass(frozen=True, slots=True)
class ConnectionClosedByPeer(Event):
    """End of stream."""
