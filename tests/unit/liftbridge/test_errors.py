"""Error tables and the translation of gRPC and nats-py errors at the boundary."""

from __future__ import annotations

import grpc
import grpc.aio
import nats.errors
import pytest

import streamwire
from streamwire.errors import (
    AuthenticationError,
    ClosedError,
    ConfigurationError,
    ConnectError,
    ConnectionClosed,
    ProducerBufferFull,
    RequestTimeout,
    ServerError,
    StreamwireError,
    TransportError,
)
from streamwire.liftbridge import (
    AckTimeout,
    EncryptionFailed,
    FailedPrecondition,
    IncorrectOffset,
    StreamAlreadyExists,
    StreamNotFound,
    TooLarge,
)
from streamwire.liftbridge._grpc import translate
from streamwire.liftbridge._nats import translate_nats
from streamwire.liftbridge.protocol.errors import (
    ACK_ERRORS,
    GRPC_ERRORS,
    AckError,
    GrpcStatus,
    Unauthenticated,
    UnknownAckError,
    UnknownLiftbridgeError,
)


def test_grpc_status_numbers_match_grpc() -> None:
    for status in GrpcStatus:
        assert grpc.StatusCode[status.name].value[0] == status.value


def test_ack_error_classes() -> None:
    assert isinstance(ACK_ERRORS.from_code(2), IncorrectOffset)
    assert isinstance(ACK_ERRORS.from_code(3), TooLarge)
    assert isinstance(ACK_ERRORS.from_code(4), EncryptionFailed)
    unknown = ACK_ERRORS.from_code(1)
    assert isinstance(unknown, UnknownAckError)
    assert unknown.code == 1
    assert isinstance(ACK_ERRORS.from_code(99), UnknownAckError)
    assert issubclass(IncorrectOffset, AckError)
    assert isinstance(ServerError.from_code("liftbridge-ack", 2), IncorrectOffset)


def test_grpc_error_classes() -> None:
    assert isinstance(GRPC_ERRORS.from_code(5, "x"), StreamNotFound)
    assert isinstance(ServerError.from_code("liftbridge", 6), StreamAlreadyExists)
    assert FailedPrecondition.retriable
    assert issubclass(Unauthenticated, AuthenticationError)
    assert isinstance(GRPC_ERRORS.from_code(2), UnknownLiftbridgeError)
    assert issubclass(AckTimeout, RequestTimeout)
    assert issubclass(AckTimeout, TimeoutError)


def _rpc_error(code: grpc.StatusCode, details: str = "details") -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (grpc.StatusCode.NOT_FOUND, StreamNotFound),
        (grpc.StatusCode.ALREADY_EXISTS, StreamAlreadyExists),
        (grpc.StatusCode.FAILED_PRECONDITION, FailedPrecondition),
        (grpc.StatusCode.DEADLINE_EXCEEDED, RequestTimeout),
        (grpc.StatusCode.UNAVAILABLE, ConnectError),
        (grpc.StatusCode.CANCELLED, ConnectionClosed),
        (grpc.StatusCode.UNKNOWN, UnknownLiftbridgeError),
        (grpc.StatusCode.DATA_LOSS, UnknownLiftbridgeError),
    ],
)
def test_translate_grpc(code: grpc.StatusCode, expected: type[StreamwireError]) -> None:
    exc = translate(_rpc_error(code), "CreateStream 'x'")
    assert isinstance(exc, expected)
    assert "CreateStream 'x'" in str(exc)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (nats.errors.MaxPayloadError(), ConfigurationError),
        (nats.errors.OutboundBufferLimitError(), ProducerBufferFull),
        (nats.errors.BadSubjectError(), ConfigurationError),
        (nats.errors.ConnectionClosedError(), ClosedError),
        (nats.errors.FlushTimeoutError(), RequestTimeout),
        (nats.errors.NoServersError(), ConnectError),
        (nats.errors.StaleConnectionError(), ConnectionClosed),
        (ConnectionResetError(), ConnectionClosed),
        (OSError("boom"), TransportError),
        (nats.errors.Error("other"), TransportError),
    ],
)
def test_translate_nats(error: Exception, expected: type[StreamwireError]) -> None:
    exc = translate_nats(error, "publishing")
    assert isinstance(exc, expected)
    assert isinstance(exc, streamwire.StreamwireError)
