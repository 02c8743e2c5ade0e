"""Iggy server errors: one class per code of the upstream table, plus eviction reasons.

``ERRORS.from_code(code)`` (or ``ServerError.from_code("iggy", code)``) returns an instance
of the class registered for ``code``; codes missing from the table give
:class:`UnknownIggyServerError` with the code kept. Authentication failures also derive from
:class:`~streamwire.errors.AuthenticationError`. The classes are created from
:data:`streamwire.iggy.protocol._codes.CODES`; the ones the SDK itself refers to are bound
to module names below (all of them are reachable with :func:`error_class`).

An eviction (docs/protocol/iggy.md §2.6) ends the session; :func:`eviction_error` maps its
reason to the error the official SDK reports for it.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from streamwire.codec.registry import ErrorRegistry
from streamwire.errors import (
    AuthenticationError,
    ConnectError,
    ServerError,
    StreamAlreadyExistsError,
    StreamNotFoundError,
)
from streamwire.iggy.protocol._codes import CODES
from streamwire.iggy.protocol.constants import unpack_version

__all__ = (
    "ERRORS",
    "CONSUMER_GROUP_MISSING",
    "STREAM_OR_TOPIC_MISSING",
    "ConsumerGroupIdNotFound",
    "ConsumerGroupMemberNotFound",
    "ConsumerGroupNameAlreadyExists",
    "ConsumerGroupNameNotFound",
    "ConsumerGroupPartitionNotOwned",
    "ConsumerOffsetNotFound",
    "EvictionReason",
    "FeatureUnavailable",
    "IggyServerError",
    "IncompatibleProtocolVersion",
    "IncompatibleServer",
    "InvalidCommand",
    "InvalidCredentials",
    "InvalidFormat",
    "InvalidPersonalAccessToken",
    "PartitionNotFound",
    "ResourceNotFound",
    "StaleClient",
    "StreamIdNotFound",
    "StreamNameAlreadyExists",
    "StreamNameNotFound",
    "TopicIdNotFound",
    "TopicNameAlreadyExists",
    "TopicNameNotFound",
    "TransientNotAccepted",
    "TransientNotCommitted",
    "Unauthenticated",
    "Unauthorized",
    "UnknownIggyServerError",
    "UserAlreadyExists",
    "error_class",
    "eviction_error",
    "incompatible_server",
)


class IggyServerError(ServerError):
    """An Iggy server answered with an error code (reply status or result section)."""

    protocol = "iggy"


class UnknownIggyServerError(IggyServerError):
    """An error code this version of streamwire does not know."""


ERRORS: Final = ErrorRegistry("iggy", IggyServerError, UnknownIggyServerError)

# Codes whose class also derives from AuthenticationError (credentials or session refused).
_AUTH_CODES: Final = frozenset({40, 42, 43, 44, 47, 53, 54})
# "Retry the same request" (§2.5): transient consensus outcomes.
_RETRIABLE_CODES: Final = frozenset({57, 58})
# After these the session (and so the connection) is gone.
_FATAL_CODES: Final = frozenset({30, 14001, 14003})
# The unified API's "no such stream" and "stream exists" (a bare name addresses a topic, so
# the topic codes count too): stream/topic id or name not found; stream/topic name exists.
_NOT_FOUND_CODES: Final = frozenset({1009, 1010, 2010, 2011})
_EXISTS_CODES: Final = frozenset({1012, 2013})


def _bases(code: int) -> tuple[type[BaseException], ...]:
    if code in _AUTH_CODES:
        return (AuthenticationError,)
    if code in _NOT_FOUND_CODES:
        return (StreamNotFoundError,)
    if code in _EXISTS_CODES:
        return (StreamAlreadyExistsError,)
    return ()


for _code, _name, _doc in CODES:
    ERRORS.define(
        _name,
        _code,
        _doc,
        retriable=_code in _RETRIABLE_CODES,
        connection_usable=_code not in _FATAL_CODES,
        bases=_bases(_code),
        module=__name__,
    )


def error_class(name_or_code: str | int) -> type[ServerError]:
    """The class for a code, or for its name in the upstream table."""
    if isinstance(name_or_code, int):
        return ERRORS.class_for(name_or_code)
    for cls in ERRORS.codes().values():
        if cls.__name__ == name_or_code:
            return cls
    raise LookupError(f"no Iggy error named {name_or_code!r}")


InvalidCommand: Final = ERRORS.class_for(3)
InvalidFormat: Final = ERRORS.class_for(4)
FeatureUnavailable: Final = ERRORS.class_for(5)
ResourceNotFound: Final = ERRORS.class_for(20)
StaleClient: Final = ERRORS.class_for(30)
Unauthenticated: Final = ERRORS.class_for(40)
Unauthorized: Final = ERRORS.class_for(41)
InvalidCredentials: Final = ERRORS.class_for(42)
UserAlreadyExists: Final = ERRORS.class_for(46)
InvalidPersonalAccessToken: Final = ERRORS.class_for(53)
TransientNotCommitted: Final = ERRORS.class_for(57)
TransientNotAccepted: Final = ERRORS.class_for(58)
StreamIdNotFound: Final = ERRORS.class_for(1009)
StreamNameNotFound: Final = ERRORS.class_for(1010)
StreamNameAlreadyExists: Final = ERRORS.class_for(1012)
TopicIdNotFound: Final = ERRORS.class_for(2010)
TopicNameNotFound: Final = ERRORS.class_for(2011)
TopicNameAlreadyExists: Final = ERRORS.class_for(2013)
PartitionNotFound: Final = ERRORS.class_for(3007)
ConsumerOffsetNotFound: Final = ERRORS.class_for(3021)
ConsumerGroupIdNotFound: Final = ERRORS.class_for(5000)
ConsumerGroupNameNotFound: Final = ERRORS.class_for(5003)
ConsumerGroupNameAlreadyExists: Final = ERRORS.class_for(5004)
ConsumerGroupMemberNotFound: Final = ERRORS.class_for(5006)
ConsumerGroupPartitionNotOwned: Final = ERRORS.class_for(5009)
IncompatibleProtocolVersion: Final = ERRORS.class_for(14003)

#: "No such stream or topic". A real server (0.9.0-edge.5) answers a stream or topic named
#: by its *name* that does not exist with the "ID not found" codes, the double and the notes
#: with the "name not found" ones: ``missing_ok`` accepts both (docs/iggy.md).
STREAM_OR_TOPIC_MISSING: Final = (
    StreamIdNotFound,
    StreamNameNotFound,
    TopicIdNotFound,
    TopicNameNotFound,
)
#: The same for consumer groups.
CONSUMER_GROUP_MISSING: Final = (ConsumerGroupIdNotFound, ConsumerGroupNameNotFound)


class EvictionReason(IntEnum):
    """The last byte of an eviction frame (§2.6)."""

    NO_SESSION = 1
    CLIENT_RELEASE_TOO_LOW = 2
    CLIENT_RELEASE_TOO_HIGH = 3
    INVALID_REQUEST_OPERATION = 4
    INVALID_REQUEST_BODY = 5
    INVALID_REQUEST_BODY_SIZE = 6
    SESSION_TOO_LOW = 7
    SESSION_RELEASE_MISMATCH = 8
    INVALID_CREDENTIALS = 9
    INVALID_TOKEN = 10
    USER_INACTIVE = 11
    SESSION_ERROR = 12
    STALE_CLIENT = 13
    INCOMPATIBLE_PROTOCOL = 14
    MALFORMED_LOGIN = 15


_R = EvictionReason
# reason -> the error code the Rust SDK reports for it (§2.6 table)
EVICTION_CODES: Final[dict[EvictionReason, int]] = {
    _R.NO_SESSION: 40,
    _R.CLIENT_RELEASE_TOO_LOW: 3,
    _R.CLIENT_RELEASE_TOO_HIGH: 3,
    _R.INVALID_REQUEST_OPERATION: 3,
    _R.INVALID_REQUEST_BODY: 3,
    _R.INVALID_REQUEST_BODY_SIZE: 3,
    _R.SESSION_TOO_LOW: 40,
    _R.SESSION_RELEASE_MISMATCH: 40,
    _R.INVALID_CREDENTIALS: 42,
    _R.INVALID_TOKEN: 53,
    _R.USER_INACTIVE: 40,
    _R.SESSION_ERROR: 40,
    _R.STALE_CLIENT: 30,
    _R.INCOMPATIBLE_PROTOCOL: 14003,
    _R.MALFORMED_LOGIN: 4,
}


def eviction_error(
    reason: int, *, server_version: int = 0, server_version_min: int = 0
) -> ServerError:
    """The error an eviction with ``reason`` stands for; ``.eviction_reason`` keeps the
    reason (an :class:`EvictionReason`, or the raw int for an unknown one)."""
    try:
        known: EvictionReason | int = EvictionReason(reason)
        name = EvictionReason(reason).name.lower().replace("_", " ")
        code = EVICTION_CODES[EvictionReason(reason)]
    except ValueError:
        known, name, code = reason, f"unknown reason {reason}", 40
    detail = f"evicted by the server: {name}"
    if known is EvictionReason.INCOMPATIBLE_PROTOCOL:
        high = ".".join(map(str, unpack_version(server_version)))
        low = ".".join(map(str, unpack_version(server_version_min)))
        detail += f" (the server accepts protocol {low} to {high})"
    error = ERRORS.from_code(code, detail)
    if known is EvictionReason.INCOMPATIBLE_PROTOCOL:
        error.server_protocols = (server_version_min, server_version)  # type: ignore[attr-defined]
    error.eviction_reason = known  # type: ignore[attr-defined]
    return error


#: The Iggy server release that speaks each binary protocol (major, minor): docs/protocol/iggy.md
#: §1. streamwire speaks 0.11 (server 0.9).
SERVER_RELEASES: Final = {(0, 10): "0.8", (0, 11): "0.9", (0, 12): "0.10"}


class IncompatibleServer(ConnectError):
    """The Iggy server refused the binary protocol streamwire speaks at login (eviction 14,
    error 14003): no connection can be made; ``client_protocol`` and ``server_protocols``
    (lowest, highest) are packed versions (``major << 20 | minor << 10 | patch``)."""

    def __init__(self, message: str, client_protocol: int, server_protocols: tuple[int, int]):
        super().__init__(message)
        self.client_protocol = client_protocol
        self.server_protocols = server_protocols


def _release(packed: int) -> str:
    major, minor, _ = unpack_version(packed)
    server = SERVER_RELEASES.get((major, minor))
    return f"Iggy server {server}" if server else f"an Iggy server of protocol {major}.{minor}"


def incompatible_server(
    address: str, client_protocol: int, refused: ServerError
) -> IncompatibleServer:
    """What a login refused for its protocol version (``refused``, from
    :func:`eviction_error`) raises: both versions, and what to upgrade."""
    low, high = getattr(refused, "server_protocols", (0, 0))
    ours = ".".join(map(str, unpack_version(client_protocol)))
    theirs = ".".join(map(str, unpack_version(high)))
    lowest = ".".join(map(str, unpack_version(low)))
    if high:
        server = f"it speaks protocol {lowest} to {theirs} ({_release(high)})"
        newer = high >> 10 > client_protocol >> 10
        advice = (
            f"use a streamwire release made for {_release(high)}, or connect to "
            f"{_release(client_protocol)}"
            if newer
            else f"upgrade the server to {_release(client_protocol)}"
        )
    else:
        server, advice = "it did not say which it speaks", f"use {_release(client_protocol)}"
    return IncompatibleServer(
        f"the Iggy server at {address} refused streamwire's binary protocol {ours} "
        f"({_release(client_protocol)}): {server}; {advice}",
        client_protocol,
        (low, high),
    )
