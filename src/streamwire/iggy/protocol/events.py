"""Events the Iggy connection machine reports, named in the past tense."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamwire.errors import RemoteProtocolError, ServerError, StreamwireError

if TYPE_CHECKING:
    from streamwire.iggy.protocol.machine import PendingRequest

__all__ = (
    "ConnectionClosedByPeer",
    "Event",
    "Evicted",
    "HeartbeatDue",
    "LoggedIn",
    "ProtocolFailed",
    "ReplyReceived",
    "ReplyTimedOut",
    "RequestFailed",
)


class Event:
    __slots__ = ()


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
