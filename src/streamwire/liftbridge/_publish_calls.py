"""The two ways a producer's PublishAsync stream is carried, behind one small surface.

:class:`GrpcioPublishCall` wraps a grpc.aio stream-stream call (one request per
``write_many``: a grpc.aio write cancelled half-way cancels the call); :class:`H2PublishCall`
a :class:`~streamwire.transport.h2call.GrpcCall` on a shared HTTP/2 connection (a batch of
requests per ``write_many``, sent in as few DATA frames as the server's windows allow;
every response a socket read completed per ``read_many``). Both raise :class:`Broken` with
the streamwire error of a stream that ended, so ``_grpc_publish`` handles them alike.

``PUBLISH_TRANSPORTS`` are the values of ``connect(publish_transport=...)``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any, Final, Protocol

import grpc
import grpc.aio

from streamwire.errors import ConnectError, ConnectionClosed, StreamwireError
from streamwire.liftbridge._grpc import METHODS, RpcFailed, translate
from streamwire.liftbridge._h2_subscription import status_of
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.errors import Internal, UnknownLiftbridgeError
from streamwire.transport import h2grpc
from streamwire.transport.h2call import GrpcCall

__all__ = (
    "PUBLISH_TRANSPORTS",
    "Broken",
    "GrpcioPublishCall",
    "H2PublishCall",
    "PublishCall",
    "stream_error",
)

logger = logging.getLogger(__name__)

#: ``publish_transport`` values (see ``Client.publish_transport``).
PUBLISH_TRANSPORTS: Final = ("auto", "http2", "grpcio")
#: Send buffer of an HTTP/2 PublishAsync call: ``write_many`` waits above it.
SEND_BUFFER: Final = 1 << 20
#: Receive window (stream and connection) of an HTTP/2 PublishAsync call.
WINDOW: Final = 1 << 20
#: Largest response accepted (as the grpcio channels: 64 MiB).
MAX_MESSAGE: Final = 64 << 20


class Broken(Exception):
    """The stream ended: ``error`` is why, as the producer reports it."""

    def __init__(self, error: StreamwireError) -> None:
        super().__init__(str(error))
        self.error = error


def stream_error(exc: grpc.aio.AioRpcError | RpcFailed, what: str) -> StreamwireError:
    """The error of a PublishAsync stream that ended with a status. The server refuses
    single messages with ``asyncError`` responses, not with the stream's status: a status
    of INTERNAL or UNKNOWN there is the transport's (grpc reports a reset connection as
    INTERNAL "Internal error from Core"), so it is :class:`ConnectionClosed`, chained to
    the translated status; other statuses translate as usual (UNAVAILABLE: ConnectError,
    UNIMPLEMENTED, UNAUTHENTICATED, ...)."""
    error = translate(exc, what)
    if isinstance(error, Internal | UnknownLiftbridgeError):
        closed = ConnectionClosed(f"{what}: the stream broke ({exc.details()})")
        closed.__cause__ = error
        return closed
    return error


class PublishCall(Protocol):
    """What the publisher uses of a stream."""

    batched: bool
    """Whether ``write_many`` takes many requests at once (else one at a time)."""

    async def write_many(self, requests: list[bytes]) -> None:
        """Write ``requests`` (serialized PublishRequests); raises :class:`Broken`."""

    async def read_many(self) -> list[pb.PublishResponse]:
        """The next responses (``[]``: the server ended the stream); raises :class:`Broken`."""

    async def done_writing(self) -> None:
        """Half-close."""

    def cancel(self) -> None:
        """End the stream now (idempotent)."""


class GrpcioPublishCall:
    """A grpc.aio PublishAsync call (requests written as they are: already serialized)."""

    batched = False

    def __init__(self, channel: grpc.aio.Channel, what: str) -> None:
        m = METHODS["PublishAsync"]
        self._call: Any = channel.stream_stream(
            m.path, request_serializer=None, response_deserializer=m.response.FromString
        )()
        self._what = what

    async def write_many(self, requests: list[bytes]) -> None:
        error: StreamwireError | None = None
        try:
            for request in requests:
                await self._call.write(request)
        except grpc.aio.AioRpcError as exc:
            error = stream_error(exc, self._what)
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            error = ConnectionClosed(f"{self._what}: the stream ended ({exc!r})")
        if error is not None:  # raised outside the handler: no context holding the call
            raise Broken(error)

    async def read_many(self) -> list[pb.PublishResponse]:
        error: StreamwireError | None = None
        try:
            response = await self._call.read()
            if response is grpc.aio.EOF:
                return []
            return [response]
        except grpc.aio.AioRpcError as exc:
            logger.debug("%s ended: %s", self._what, exc.debug_error_string())
            error = stream_error(exc, self._what)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # grpc.aio raises CancelledError from read() when the call itself was cancelled
            # (the channel closed under it)
            error = ConnectionClosed(f"{self._what}: the gRPC call was cancelled")
        raise Broken(error)

    async def done_writing(self) -> None:
        await self._call.done_writing()

    def cancel(self) -> None:
        self._call.cancel()


def _split(buf: bytearray) -> tuple[list[pb.PublishResponse], int, int]:
    raws, consumed, nbytes = h2grpc.split_messages(buf, MAX_MESSAGE)
    parse = pb.PublishResponse.FromString
    return [parse(raw) for raw in raws], consumed, nbytes


class H2PublishCall:
    """A PublishAsync call on streamwire's own HTTP/2 connection. Open it with
    :meth:`open`; a call that could not be opened is broken from the start (its reads and
    writes raise why)."""

    batched = True

    def __init__(
        self,
        what: str,
        on_not_http2: Callable[[], object] | None = None,
        pool: h2grpc.H2Pool | None = None,
    ) -> None:
        self._what = what
        self._pool = pool
        self._on_not_http2 = on_not_http2
        self._call: GrpcCall[pb.PublishResponse] | None = None
        self._failed: StreamwireError | None = None

    @classmethod
    def failed(cls, what: str, error: StreamwireError) -> H2PublishCall:
        """A call broken from the start with ``error``."""
        call = cls(what)
        call._failed = error
        return call

    async def open(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        timeout: float | None,
    ) -> bool:
        """Connect and open the call: the request side is open once connected (requests are
        written within the default windows until the server's SETTINGS come). False if TLS
        did not negotiate HTTP/2 (the caller may use grpcio; a plaintext server that does
        not speak it ends the call, and ``on_not_http2`` is called); any other failure is
        what the call raises. Cancellation: nothing is left open."""
        loop = asyncio.get_running_loop()

        def factory() -> GrpcCall[pb.PublishResponse]:
            return GrpcCall(
                loop=loop,
                authority=h2grpc.authority(host, port, server_hostname),
                path=METHODS["PublishAsync"].path,
                split=_split,
                scheme="https" if ssl_context is not None else "http",
                window=WINDOW,
                max_message=MAX_MESSAGE,
                max_buffer=SEND_BUFFER,
            )

        error: StreamwireError | None = None
        try:
            self._call = await h2grpc.open_call(
                factory,
                host,
                port,
                ssl_context=ssl_context,
                server_hostname=server_hostname,
                timeout=timeout,
                wait_settings=False,
                pool=self._pool,
            )
        except h2grpc.NotHttp2 as exc:
            logger.info("%s: %s", self._what, exc)
            return False
        except h2grpc.CallEnded as exc:
            error = stream_error(status_of(exc), self._what)
        except TimeoutError:
            error = ConnectError(f"{self._what}: server unavailable (connecting timed out)")
        except (OSError, ConnectError) as exc:  # refused, unreachable, TLS handshake failed
            error = ConnectError(f"{self._what}: server unavailable (failed to connect: {exc})")
        except ConnectionClosed as exc:  # the client's connections are closed
            error = exc
        self._failed = error
        return True

    def _broken(self, ended: h2grpc.CallEnded) -> Broken:
        logger.debug("%s ended: %s", self._what, ended)
        call = self._call
        if call is not None and call.not_http2:  # (not a connection lost before SETTINGS)
            if self._on_not_http2 is not None:
                self._on_not_http2()
            return Broken(ConnectError(f"{self._what}: the server does not speak HTTP/2"))
        if ended.code == h2grpc.Status.OK:  # while requests were still being written
            return Broken(ConnectionClosed(f"{self._what}: the server ended the stream"))
        return Broken(stream_error(status_of(ended), self._what))

    async def write_many(self, requests: list[bytes]) -> None:
        call = self._call
        if call is None:
            raise Broken(self._failed or ConnectionClosed(f"{self._what}: not open"))
        error: h2grpc.CallEnded | None = None
        try:
            await call.write(requests)
        except h2grpc.CallEnded as exc:
            error = exc
        if error is not None:
            raise self._broken(error)

    async def read_many(self) -> list[pb.PublishResponse]:
        call = self._call
        if call is None:
            raise Broken(self._failed or ConnectionClosed(f"{self._what}: not open"))
        error: h2grpc.CallEnded | None = None
        try:
            return await call.read_many()
        except h2grpc.CallEnded as exc:
            error = exc
        raise self._broken(error)

    async def done_writing(self) -> None:
        if self._call is not None:
            self._call.done_writing()

    def cancel(self) -> None:
        if self._call is not None:
            self._call.cancel()
