"""Liftbridge server errors: gRPC status codes of the control plane, and ack errors.

Two code tables, two registries:

* ``"liftbridge"``: gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html)
  as the Liftbridge server uses them (``docs/protocol/liftbridge.md`` §2.4).
  ``DEADLINE_EXCEEDED`` becomes :class:`~streamwire.errors.RequestTimeout` and
  ``UNAVAILABLE``/``CANCELLED`` transport errors in the driver, so they have no class here.
* ``"liftbridge-ack"``: ``Ack.Error`` of api.proto v1.9.0, carried by acks on the NATS path
  (``docs/protocol/liftbridge.md`` §3.5). ``UNKNOWN`` (1) and unlisted values give
  :class:`UnknownAckError`.

``ServerError.from_code("liftbridge", 5)`` and ``ACK_ERRORS.from_code(2)`` return instances.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

from streamwire.codec.registry import ErrorRegistry
from streamwire.errors import (
    AuthenticationError,
    RequestTimeout,
    ServerError,
    StreamAlreadyExistsError,
    StreamNotFoundError,
)

__all__ = (
    "ACK_ERRORS",
    "GRPC_ERRORS",
    "AckError",
    "AckErrorCode",
    "AckTimeout",
    "Aborted",
    "EncryptionFailed",
    "FailedPrecondition",
    "GrpcStatus",
    "IncorrectOffset",
    "Internal",
    "InvalidArgument",
    "LiftbridgeServerError",
    "NoResponders",
    "PermissionDenied",
    "ResourceExhausted",
    "StreamAlreadyExists",
    "StreamNotFound",
    "TooLarge",
    "Unauthenticated",
    "Unimplemented",
    "UnknownAckError",
    "UnknownLiftbridgeError",
)


class GrpcStatus(IntEnum):
    """gRPC status codes (numbers from the gRPC specification)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class AckErrorCode(IntEnum):
    """``Ack.Error`` (api.proto v1.9.0)."""

    OK = 0
    UNKNOWN = 1
    INCORRECT_OFFSET = 2
    TOO_LARGE = 3
    ENCRYPTION = 4


class LiftbridgeServerError(ServerError):
    """The Liftbridge server refused a request (``.code`` is the gRPC status code)."""

    protocol = "liftbridge"


class UnknownLiftbridgeError(LiftbridgeServerError):
    """A gRPC status this version of streamwire has no class for (UNKNOWN included)."""


class AckError(LiftbridgeServerError):
    """The partition leader refused a published message (``.code`` is ``Ack.Error``)."""

    protocol = "liftbridge-ack"


class UnknownAckError(AckError):
    """An ack error this version of streamwire does not know (or ``UNKNOWN``)."""


GRPC_ERRORS: Final = ErrorRegistry("liftbridge", LiftbridgeServerError, UnknownLiftbridgeError)
ACK_ERRORS: Final = ErrorRegistry("liftbridge-ack", AckError, UnknownAckError)
_G = GrpcStatus
_MOD = __name__

InvalidArgument = GRPC_ERRORS.define(
    "InvalidArgument",
    _G.INVALID_ARGUMENT,
    "The server rejected an argument (empty or reserved name, invalid subject...).",
    module=_MOD,
)
StreamNotFound = GRPC_ERRORS.define(
    "StreamNotFound",
    _G.NOT_FOUND,
    "The stream or partition does not exist.",
    bases=(StreamNotFoundError,),
    module=_MOD,
)
StreamAlreadyExists = GRPC_ERRORS.define(
    "StreamAlreadyExists",
    _G.ALREADY_EXISTS,
    "The stream already exists.",
    bases=(StreamAlreadyExistsError,),
    module=_MOD,
)
PermissionDenied = GRPC_ERRORS.define(
    "PermissionDenied", _G.PERMISSION_DENIED, "Not authorized.", module=_MOD
)
ResourceExhausted = GRPC_ERRORS.define(
    "ResourceExhausted",
    _G.RESOURCE_EXHAUSTED,
    "Nothing more to read (stop position reached, end of a readonly partition).",
    module=_MOD,
)
FailedPrecondition = GRPC_ERRORS.define(
    "FailedPrecondition",
    _G.FAILED_PRECONDITION,
    "Not possible on this server now (not the partition leader, partition paused).",
    retriable=True,
    module=_MOD,
)
Aborted = GRPC_ERRORS.define(
    "Aborted", _G.ABORTED, "The operation was aborted.", retriable=True, module=_MOD
)
Unimplemented = GRPC_ERRORS.define(
    "Unimplemented", _G.UNIMPLEMENTED, "The server does not implement this RPC.", module=_MOD
)
Internal = GRPC_ERRORS.define(
    "Internal",
    _G.INTERNAL,
    "Internal server error (also: cursors disabled, partition closed while subscribed).",
    retriable=True,
    module=_MOD,
)
Unauthenticated = GRPC_ERRORS.define(
    "Unauthenticated",
    _G.UNAUTHENTICATED,
    "Credentials were refused.",
    bases=(AuthenticationError,),
    module=_MOD,
)

IncorrectOffset = ACK_ERRORS.define(
    "IncorrectOffset",
    AckErrorCode.INCORRECT_OFFSET,
    "The expected offset did not match the partition (optimistic concurrency control).",
    module=_MOD,
)
TooLarge = ACK_ERRORS.define(
    "TooLarge",
    AckErrorCode.TOO_LARGE,
    "The message exceeds the server's clustering.replication.max.bytes.",
    module=_MOD,
)
EncryptionFailed = ACK_ERRORS.define(
    "EncryptionFailed",
    AckErrorCode.ENCRYPTION,
    "The partition could not encrypt the message.",
    module=_MOD,
)


class AckTimeout(RequestTimeout):
    """No ack arrived in time. The message may still have been stored (at-least-once: a
    retry can duplicate it). Also what a missing stream or a paused partition looks like on
    the NATS path, unless ``detect_no_responders`` is on."""


class NoResponders(LiftbridgeServerError):
    """Nothing listens on the partition subject (no such stream or partition, the partition
    is paused, or its leader is not elected yet): NATS answered "503 no responders"."""

    retriable = True
