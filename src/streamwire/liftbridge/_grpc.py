"""gRPC plumbing for the Liftbridge control plane: channels per broker, the method table of
``proto.API`` (read from the vendored api.proto's descriptor, so paths and types come from
the proto and nowhere else), deadlines, and translation of gRPC errors at the boundary.

Unary calls go through ``grpc.aio`` channels. Subscribe streams are read by a thread each
(``_stream_reader``) over grpc's synchronous API, on a second, synchronous channel per broker
with the same target, credentials and options.

No generated ``*_grpc`` module is used: grpcio-tools' stub imports ``api_pb2`` as a top-level
module and pins the grpcio version it was generated with; a dozen lines over the descriptor
need neither.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import grpc
import grpc.aio
import grpc.experimental
from google.protobuf.message import Message as PbMessage
from google.protobuf.message_factory import GetMessageClass

from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectError,
    ConnectionClosed,
    DecodeError,
    RequestTimeout,
    StreamwireError,
)
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import GRPC_ERRORS, GrpcStatus
from streamwire.transport.tls import TLSOptions

__all__ = (
    "METHODS",
    "Channels",
    "Method",
    "RpcFailed",
    "grpc_credentials",
    "translate",
    "without_client_certificate",
)

_Ch = TypeVar("_Ch", grpc.aio.Channel, grpc.Channel)

logger = logging.getLogger(__name__)

AddressResolver = Callable[[str, int], tuple[str, int]]

#: Channel options: messages up to 64 MiB each way; a private subchannel pool per channel
#: (grpc shares subchannels process-wide by default, so one failed dial would make every new
#: channel to that address fail fast for the whole reconnect backoff); reconnect backoff
#: from 0.2 s capped at 5 s instead of 1 s to 120 s, so a restarted server is reached again
#: quickly. (Not grpc.min_reconnect_backoff_ms: it is also the connect timeout.)
_CHANNEL_OPTIONS: Final = (
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5000),
)

#: The synchronous channels (Subscribe streams only) add SingleThreadedUnaryStream: the
#: thread iterating a call polls the call's completion queue itself, instead of waiting for
#: the channel's spin thread to hand each message over (no extra thread per channel, and
#: about three times the messages per second: 80-90 k/s against 28 k/s, one thread reading
#: pre-published 256-byte messages from the harness broker). BDP probing is off: with it, a
#: thread that reads fast grows gRPC's flow-control window until a consumer that stops taking
#: messages has tens of MB in flight (36 MB of 48 MB waiting, with the CPU loaded, in
#: test_slow_grpc_consumer_holds_the_server_back); without it the window stays at its default
#: and memory stays bounded, for about 20 % fewer messages per second on loopback.
_STREAM_CHANNEL_OPTIONS: Final = (
    *_CHANNEL_OPTIONS,
    (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
    ("grpc.http2.bdp_probe", 0),
)


@dataclass(frozen=True, slots=True)
class Method:
    """One RPC of ``proto.API``."""

    name: str
    path: str
    request: type[PbMessage]
    response: type[PbMessage]
    server_streaming: bool
    client_streaming: bool


def _methods() -> dict[str, Method]:
    service = pb.DESCRIPTOR.services_by_name["API"]
    return {
        m.name: Method(
            name=m.name,
            path=f"/{service.full_name}/{m.name}",
            request=GetMessageClass(m.input_type),
            response=GetMessageClass(m.output_type),
            server_streaming=m.server_streaming,
            client_streaming=m.client_streaming,
        )
        for m in service.methods
    }


METHODS: Final = _methods()


class RpcFailed(Exception):
    """How an RPC ended, as grpc reported it (``code()``, ``details()``), without the call.

    grpc's synchronous API raises the call object itself; chaining that to a streamwire error
    would keep the call, and with it its HTTP/2 connection, alive as long as the error.
    Only ever chained (``__cause__``), never raised to applications.
    """

    def __init__(self, code: grpc.StatusCode | None, details: str | None) -> None:
        name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
        super().__init__(f"{name}: {details}" if details else name)
        self._code = code
        self._details = details

    @classmethod
    def of(cls, exc: grpc.RpcError) -> RpcFailed:
        """The status of a failed synchronous call (the ``grpc.RpcError`` it raised)."""
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = exc.details() if callable(getattr(exc, "details", None)) else None
        return cls(code, details)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str | None:
        return self._details


def translate(exc: grpc.aio.AioRpcError | RpcFailed, what: str) -> StreamwireError:
    """The streamwire exception for a failed RPC (chain it: ``raise ... from exc``)."""
    code = exc.code()
    details = exc.details() or ""
    number = int(code.value[0]) if isinstance(code, grpc.StatusCode) else GrpcStatus.UNKNOWN
    text = f"{what}: {details}" if details else what
    if number == GrpcStatus.DEADLINE_EXCEEDED:
        return RequestTimeout(f"{what} timed out")
    if number == GrpcStatus.UNAVAILABLE:
        return ConnectError(f"{what}: server unavailable ({details})")
    if number == GrpcStatus.CANCELLED:
        return ConnectionClosed(f"{what}: cancelled by the channel ({details})")
    return GRPC_ERRORS.from_code(number, text)


def _read(path: str | os.PathLike[str] | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(os.fspath(path), "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigurationError(f"cannot read {os.fspath(path)!r}: {exc}") from exc


def grpc_credentials(tls: TLSOptions) -> grpc.ChannelCredentials:
    """gRPC channel credentials from :class:`TLSOptions` (CA, client certificate).

    gRPC always verifies the server; ``verify=False`` and ``minimum_version`` cannot be
    expressed and are refused.
    """
    if not tls.verify:
        raise ConfigurationError("gRPC cannot skip server certificate verification")
    roots = _read(tls.ca_file)
    if tls.ca_data is not None:
        roots = tls.ca_data.encode() if isinstance(tls.ca_data, str) else tls.ca_data
    if tls.key_password is not None:
        raise ConfigurationError("gRPC cannot use a password-protected client key")
    chain = _read(tls.cert_file)
    key = _read(tls.key_file) if tls.key_file is not None else chain
    creds: grpc.ChannelCredentials = grpc.ssl_channel_credentials(
        root_certificates=roots, private_key=key if chain else None, certificate_chain=chain
    )
    return creds


#: What grpc reports when a TLS server ends the connection for want of a client
#: certificate: with TLS 1.3 the client's handshake completes and the server's alert
#: (certificate_required) arrives as undecryptable data; with TLS 1.2 the handshake fails.
_NO_CLIENT_CERT_SIGNS: Final = ("TSI_DATA_CORRUPTED", "CERTIFICATE_REQUIRED", "Handshake failed")


#: What grpc reports when the server accepted the connection and then closed or reset it
#: (``Socket closed``, ``recvmsg:Connection reset by peer``): not a refusal.
_PEER_CLOSED_SIGNS: Final = ("Socket closed", "Connection reset by peer", "Broken pipe")


def peer_closed(exc: ConnectError) -> bool:
    """Whether the server accepted the connection and then closed it (a ``ConnectError``
    from grpc's UNAVAILABLE names both that and a refusal), TLS refusals aside."""
    text = str(exc)
    if any(sign in text for sign in _NO_CLIENT_CERT_SIGNS):
        return False
    return any(sign in text for sign in _PEER_CLOSED_SIGNS)


def without_client_certificate(tls: TLSOptions | None, exc: ConnectError) -> ConnectError | None:
    """The error to raise instead of ``exc`` when the client offered no certificate over
    TLS and the server ended the connection as one that requires a client certificate
    (mutual TLS) does; ``None`` otherwise."""
    if tls is None or tls.cert_file is not None or type(exc) is not ConnectError:
        return None
    if not any(sign in str(exc) for sign in _NO_CLIENT_CERT_SIGNS):
        return None
    return ConnectError(
        f"{exc}: the server ended the TLS connection without a client certificate from us "
        "(a server that requires one, mutual TLS, does so): give it with "
        "tls=TLSOptions(ca_file=..., cert_file=..., key_file=...)"
    )


class Channels:
    """One ``grpc.aio`` channel per broker address for unary calls, and one synchronous
    channel per broker address for Subscribe streams, each opened on first use.

    The synchronous channels belong to the client, like the aio ones, rather than to each
    consumer: the consumers of a client that read from one broker share its HTTP/2
    connection (each stream keeps its own flow-control window, so one consumer that stops
    reading holds back only its own stream), a resubscription reuses the connection, and
    ``close`` (client close) closes them all, cancelling any stream still open.
    """

    def __init__(
        self,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        server_hostname: str | None = None,
        resolver: AddressResolver | None = None,
        keepalive_time: float | None = None,
        keepalive_timeout: float = 20.0,
    ) -> None:
        self._credentials = credentials
        extra: list[tuple[str, Any]] = []
        if server_hostname is not None:
            extra.append(("grpc.ssl_target_name_override", server_hostname))
        if keepalive_time is not None:  # as the HTTP/2 client's (h2machine.H2Settings)
            extra.append(("grpc.keepalive_time_ms", round(keepalive_time * 1000)))
            extra.append(("grpc.keepalive_timeout_ms", round(keepalive_timeout * 1000)))
        self._options: list[tuple[str, Any]] = [*_CHANNEL_OPTIONS, *extra]
        self._stream_options: list[tuple[str, Any]] = [*_STREAM_CHANNEL_OPTIONS, *extra]
        self._resolve: AddressResolver = resolver or (lambda h, p: (h, p))
        self._channels: dict[tuple[str, int], grpc.aio.Channel] = {}
        self._stream_channels: dict[tuple[str, int], grpc.Channel] = {}
        self._closed = False

    def resolve(self, host: str, port: int) -> tuple[str, int]:
        """Where the broker advertised as ``host:port`` is reached (the address resolver)."""
        return self._resolve(host, port)

    def _target(self, host: str, port: int, resolve: bool) -> str:
        h, p = self._resolve(host, port) if resolve else (host, port)
        return f"[{h}]:{p}" if ":" in h else f"{h}:{p}"

    def channel(self, host: str, port: int, *, resolve: bool = True) -> grpc.aio.Channel:
        """The channel to the broker advertised as ``host:port``."""
        return self._cached(self._channels, host, port, resolve, grpc.aio, self._options)

    def stream_channel(self, host: str, port: int, *, resolve: bool = True) -> grpc.Channel:
        """The synchronous channel (for Subscribe streams) to the broker advertised as
        ``host:port``: same target and credentials as :meth:`channel`."""
        return self._cached(self._stream_channels, host, port, resolve, grpc, self._stream_options)

    def _cached(
        self,
        table: dict[tuple[str, int], _Ch],
        host: str,
        port: int,
        resolve: bool,
        kind: Any,
        options: list[tuple[str, Any]],
    ) -> _Ch:
        """One channel per advertised address in ``table``, made by ``kind`` (the ``grpc``
        or ``grpc.aio`` module) with the client's credentials."""
        if self._closed:
            raise ClosedError("the client is closed")
        ch = table.get((host, port))
        if ch is None:
            target = self._target(host, port, resolve)
            if self._credentials is None:
                ch = kind.insecure_channel(target, options=options)
            else:
                ch = kind.secure_channel(target, self._credentials, options=options)
            table[(host, port)] = ch
        return ch

    async def unary(
        self,
        channel: grpc.aio.Channel,
        method: str,
        request: PbMessage,
        *,
        timeout: float | None,
        what: str,
    ) -> Any:
        """Call a unary RPC with a gRPC deadline of ``timeout`` seconds.

        Cancellation: the RPC is cancelled; the server may or may not have acted on it.
        """
        m = METHODS[method]
        call = channel.unary_unary(
            m.path,
            request_serializer=m.request.SerializeToString,
            response_deserializer=m.response.FromString,
        )
        try:
            response = await call(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            # the status only: the error's traceback runs through grpc.aio's frames, which
            # hold the call, and a live call keeps its connection open after the channel
            # closed (for as long as a caller keeps our error, or until the collector
            # breaks the cycle the traceback makes)
            raise translate(exc, what) from exc.with_traceback(None)
        except asyncio.CancelledError:
            raise
        except grpc.RpcError as exc:  # pragma: no cover - grpc.aio raises AioRpcError
            raise ConnectionClosed(f"{what}: {exc}") from exc
        if response is None:  # grpc logs the protobuf error and hands out None
            raise DecodeError(m.response.DESCRIPTOR.full_name, frame=f"the {what} reply")
        return response

    @staticmethod
    def subscribe(channel: grpc.Channel, request: PbMessage) -> Any:
        """Open a Subscribe stream on a synchronous channel (no deadline: it lasts until
        cancelled). Iterating the returned call blocks and yields each response's serialized
        bytes (the reader decodes them, so an undecodable message is its own error, not
        grpc's INTERNAL); ``cancel()`` ends it from any thread."""
        m = METHODS["Subscribe"]
        call = channel.unary_stream(m.path, request_serializer=m.request.SerializeToString)
        return call(request)

    async def close(self, grace: float | None = None) -> None:
        """Close every channel (cancelling the streams still open on them). Idempotent."""
        self._closed = True
        streams, self._stream_channels = self._stream_channels, {}
        for sch in streams.values():
            try:
                sch.close()  # returns at once: it cancels the calls, it does not wait for them
            except Exception as exc:  # closing must not fail the caller
                logger.debug("closing a gRPC channel failed: %s", exc)
        channels, self._channels = self._channels, {}
        for ch in channels.values():
            try:
                await ch.close(grace)
            except Exception as exc:  # closing must not fail the caller
                logger.debug("closing a gRPC channel failed: %s", exc)
