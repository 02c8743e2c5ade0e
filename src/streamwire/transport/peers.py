"""Who answered a handshake: the services a stream client reaches by mistake, told from the
first bytes they send, so that a wrong port fails with a :class:`ConnectError` that says
what was reached and where the protocol listens, instead of a frame length made of "INFO"
or "HTTP" (issue: ``rabbitmq-stream://host:4222`` used to raise "frame of 1229866579 bytes
exceeds the limit")."""

from __future__ import annotations

from streamwire.errors import (
    ClosedError,
    ConnectError,
    ConnectionClosed,
    FrameTooLargeError,
    StreamwireError,
)

__all__ = ("DEFAULT_PORTS", "handshake_failure", "other_service")

#: Where each protocol listens by default, for the messages.
DEFAULT_PORTS = {
    "RabbitMQ Streams": "5552 (TLS: 5551)",
    "Iggy": "8090",
    "Liftbridge": "9292",
}


def other_service(first: bytes) -> str | None:
    """What kind of server sent ``first`` (the first bytes it sent), when it is one a
    stream client reaches by mistake; None when it is not recognised."""
    if first[:1] in (b"\x15", b"\x16") and first[1:2] == b"\x03":
        return "a TLS server"
    if first.startswith(b"INFO"):
        return "a NATS server (it greets with INFO; Liftbridge's NATS, usually 4222)"
    if first.startswith(b"HTTP/"):
        return "an HTTP server"
    if first.startswith(b"AMQP"):
        return "an AMQP 0-9-1 broker (RabbitMQ's AMQP port, usually 5672)"
    if first.startswith(b"SSH-"):
        return "an SSH server"
    if first.startswith(b"-ERR"):
        return "a NATS or Redis server (it answered -ERR)"
    if len(first) >= 9 and first[3] == 0x04 and first[4] in (0, 1) and first[5:9] == bytes(4):
        return "an HTTP/2 server (gRPC, such as Liftbridge's 9292)"
    return None


def handshake_failure(
    address: str, protocol: str, exc: BaseException, first: bytes = b""
) -> StreamwireError | None:
    """The error to raise instead of ``exc``, which ended the handshake with ``address``
    (``first``: the first bytes the server sent, if any), or None to raise ``exc`` as is:

    * the server is recognised as another kind (by ``first``, or by the bytes a
      :class:`FrameTooLargeError` was announced with): a :class:`ConnectError` naming it
      and the protocol's default port;
    * the server closed or reset the connection before the handshake was done: a
      :class:`ConnectionClosed` saying so (the same type on every broker), with a hint.
    """
    if isinstance(exc, FrameTooLargeError) and not first:
        first = exc.head
    where = DEFAULT_PORTS.get(protocol, "its own port")
    what = other_service(first) if first else None
    if what is not None:
        return ConnectError(
            f"{address} answered as {what}, where {protocol} was expected: check the URL's "
            f"port ({protocol} listens on {where} by default)"
        )
    if isinstance(exc, ConnectionClosed | ClosedError):
        return ConnectionClosed(
            f"{address} closed the connection during the {protocol} handshake ({exc}): check "
            f"that it is {protocol}'s port ({protocol} listens on {where} by default)"
        )
    return None
