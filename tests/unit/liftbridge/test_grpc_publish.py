"""The gRPC publish path's typed errors: PublishAsyncError codes, and how a stream ended."""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

import streamwire.liftbridge as lb
from streamwire import ConnectError, ConnectionClosed
from streamwire.liftbridge._grpc_publish import async_error, stream_error
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import (
    Internal,
    PermissionDenied,
    Unauthenticated,
    Unimplemented,
    UnknownLiftbridgeError,
)

E = pb.PublishAsyncError


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (E.INCORRECT_OFFSET, lb.IncorrectOffset),
        (E.ENCRYPTION_FAILED, lb.EncryptionFailed),
        (E.NOT_FOUND, lb.StreamNotFound),
        (E.BAD_REQUEST, lb.InvalidArgument),
        (E.PERMISSION_DENIED, PermissionDenied),
        (E.READONLY, lb.FailedPrecondition),
        (E.INTERNAL, Internal),
        (E.UNKNOWN, UnknownLiftbridgeError),
        (99, UnknownLiftbridgeError),
    ],
)
def test_async_errors_are_typed(code: int, kind: type[Exception]) -> None:
    exc = async_error(pb.PublishAsyncError(code=code, message="why"), "message 1")  # type: ignore[arg-type]
    assert isinstance(exc, kind)
    assert "message 1: why" in str(exc)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (grpc.StatusCode.INTERNAL, ConnectionClosed),  # a reset connection, as grpc reports it
        (grpc.StatusCode.UNKNOWN, ConnectionClosed),
        (grpc.StatusCode.UNAVAILABLE, ConnectError),
        (grpc.StatusCode.UNIMPLEMENTED, Unimplemented),
        (grpc.StatusCode.UNAUTHENTICATED, Unauthenticated),
    ],
)
def test_a_broken_stream_is_typed(code: grpc.StatusCode, kind: type[Exception]) -> None:
    exc = grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="Internal error from Core"
    )
    assert isinstance(stream_error(exc, "PublishAsync"), kind)
