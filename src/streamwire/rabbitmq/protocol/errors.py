"""RabbitMQ Streams server errors, one class per response code (generated from the table).

``StreamsServerError.from_code(code)`` (or ``ServerError.from_code("rabbitmq", code)``)
returns an instance of the class registered for ``code``; unlisted codes give
:class:`UnknownStreamsServerError` with the code kept.
"""

from __future__ import annotations

from typing import Final

from streamwire.codec.registry import ErrorRegistry
from streamwire.errors import (
    AuthenticationError,
    ServerError,
    StreamAlreadyExistsError,
    StreamNotFoundError,
)
from streamwire.rabbitmq.protocol.constants import ResponseCode

__all__ = (
    "ERRORS",
    "AccessRefused",
    "AuthenticationFailure",
    "AuthenticationFailureLoopback",
    "FrameTooLarge",
    "InternalError",
    "NoOffset",
    "PreconditionFailed",
    "PublisherDoesNotExist",
    "SaslCannotChangeMechanism",
    "SaslCannotChangeUsername",
    "SaslChallenge",
    "SaslError",
    "SaslMechanismNotSupported",
    "StreamAlreadyExists",
    "StreamDoesNotExist",
    "StreamNotAvailable",
    "StreamsServerError",
    "SubscriptionIdAlreadyExists",
    "SubscriptionIdDoesNotExist",
    "UnknownFrame",
    "UnknownStreamsServerError",
    "VirtualHostAccessFailure",
)


class StreamsServerError(ServerError):
    """A RabbitMQ Streams broker answered with an error response code."""

    protocol = "rabbitmq"

    @staticmethod
    def for_code(code: int, message: str = "") -> ServerError:
        return ERRORS.from_code(code, message)


class UnknownStreamsServerError(StreamsServerError):
    """A response code this version of streamwire does not know."""


ERRORS: Final = ErrorRegistry("rabbitmq", StreamsServerError, UnknownStreamsServerError)
_AUTH = (AuthenticationError,)
_R = ResponseCode

# name, code, description, retriable, connection usable afterwards, extra bases
StreamDoesNotExist = ERRORS.define(
    "StreamDoesNotExist",
    _R.STREAM_DOES_NOT_EXIST,
    "Stream does not exist.",
    bases=(StreamNotFoundError,),
)
SubscriptionIdAlreadyExists = ERRORS.define(
    "SubscriptionIdAlreadyExists", _R.SUBSCRIPTION_ID_ALREADY_EXISTS, "Subscription id in use."
)
SubscriptionIdDoesNotExist = ERRORS.define(
    "SubscriptionIdDoesNotExist", _R.SUBSCRIPTION_ID_DOES_NOT_EXIST, "No such subscription id."
)
StreamAlreadyExists = ERRORS.define(
    "StreamAlreadyExists",
    _R.STREAM_ALREADY_EXISTS,
    "Stream already exists.",
    bases=(StreamAlreadyExistsError,),
)
StreamNotAvailable = ERRORS.define(
    "StreamNotAvailable", _R.STREAM_NOT_AVAILABLE, "Stream not available.", retriable=True
)
SaslMechanismNotSupported = ERRORS.define(
    "SaslMechanismNotSupported",
    _R.SASL_MECHANISM_NOT_SUPPORTED,
    "SASL mechanism not supported.",
    connection_usable=False,
    bases=_AUTH,
)
AuthenticationFailure = ERRORS.define(
    "AuthenticationFailure",
    _R.AUTHENTICATION_FAILURE,
    "Authentication failure.",
    connection_usable=False,
    bases=_AUTH,
)
SaslError = ERRORS.define(
    "SaslError", _R.SASL_ERROR, "SASL error.", connection_usable=False, bases=_AUTH
)
SaslChallenge = ERRORS.define("SaslChallenge", _R.SASL_CHALLENGE, "SASL challenge.")
AuthenticationFailureLoopback = ERRORS.define(
    "AuthenticationFailureLoopback",
    _R.SASL_AUTHENTICATION_FAILURE_LOOPBACK,
    "User may only connect from localhost.",
    connection_usable=False,
    bases=_AUTH,
)
VirtualHostAccessFailure = ERRORS.define(
    "VirtualHostAccessFailure",
    _R.VIRTUAL_HOST_ACCESS_FAILURE,
    "Virtual host access failure.",
    connection_usable=False,
    bases=_AUTH,
)
UnknownFrame = ERRORS.define(
    "UnknownFrame", _R.UNKNOWN_FRAME, "Unknown frame.", connection_usable=False
)
FrameTooLarge = ERRORS.define(
    "FrameTooLarge", _R.FRAME_TOO_LARGE, "Frame too large.", connection_usable=False
)
InternalError = ERRORS.define(
    "InternalError", _R.INTERNAL_ERROR, "Internal broker error.", retriable=True
)
AccessRefused = ERRORS.define("AccessRefused", _R.ACCESS_REFUSED, "Access refused.")
PreconditionFailed = ERRORS.define(
    "PreconditionFailed", _R.PRECONDITION_FAILED, "Precondition failed."
)
PublisherDoesNotExist = ERRORS.define(
    "PublisherDoesNotExist", _R.PUBLISHER_DOES_NOT_EXIST, "Publisher does not exist."
)
NoOffset = ERRORS.define("NoOffset", _R.NO_OFFSET, "No offset stored for this reference.")
SaslCannotChangeMechanism = ERRORS.define(
    "SaslCannotChangeMechanism",
    _R.SASL_CANNOT_CHANGE_MECHANISM,
    "Re-authentication cannot change the SASL mechanism.",
    connection_usable=False,
    bases=_AUTH,
)
SaslCannotChangeUsername = ERRORS.define(
    "SaslCannotChangeUsername",
    _R.SASL_CANNOT_CHANGE_USERNAME,
    "Re-authentication cannot change the user name.",
    connection_usable=False,
    bases=_AUTH,
)
