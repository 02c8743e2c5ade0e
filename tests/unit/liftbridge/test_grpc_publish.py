"""The gRPC publish path's mapping of PublishAsyncError codes to typed errors."""

from __future__ import annotations

import pytest

import streamwire.liftbridge as lb
from streamwire.liftbridge._grpc_publish import async_error
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import Internal, PermissionDenied, UnknownLiftbridgeError

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
