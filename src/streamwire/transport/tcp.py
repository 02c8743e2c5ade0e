"""TCP (optionally TLS) byte streams over asyncio streams."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

from streamwire.codec.framing import FrameSpec
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectionClosed,
    ConnectTimeout,
    TimeoutError,
)
from streamwire.transport import _receive
from streamwire.transport._errors import map_errors
from streamwire.transport._receive import FrameReader, ReceiveFrames, ReceiveInto
from streamwire.transport.base import BytesLike
from streamwire.transport.deadline import Deadline, DeadlineScope
from streamwire.transport.tls import TLSOptions, create_ssl_context

__all__ = ("DEFAULT_KEEPALIVE", "DEFAULT_READ_SIZE", "TcpKeepalive", "TcpStream", "open_tcp")

logger = logging.getLogger(__name__)

#: Bytes asked for per ``read()``: large reads keep the per-chunk overhead negligible.
DEFAULT_READ_SIZE: Final = 65536


@dataclass(frozen=True, slots=True)
class TcpKeepalive:
    """How the kernel notices a peer that went silent without a reset (a black hole: a
    cable pulled, a NAT or firewall that dropped the flow, a host that lost power), for
    connections whose protocol has no heartbeat of its own, or none while idle (HTTP/2 to
    Liftbridge, whose server refuses PINGs more often than every 5 minutes): after ``idle``
    seconds without traffic a probe, then one every ``interval`` seconds, and the
    connection fails after ``count`` unanswered ones; ``user_timeout``: it also fails once
    data it sent stays unacknowledged that long (TCP_USER_TIMEOUT). With the defaults a
    dead link is noticed within about a minute, idle or not. Linux; elsewhere what the
    platform has of it."""

    idle: float = 30.0
    interval: float = 10.0
    count: int = 3
    user_timeout: float = 60.0


DEFAULT_KEEPALIVE: Final = TcpKeepalive()


async def _connect(
    host: str,
    port: int,
    limit: int,
    receive_into: bool,
    frames: tuple[FrameSpec, int] | None,
    ctx: ssl.SSLContext | None,
    server_hostname: str | None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if not receive_into and frames is None:
        return await asyncio.open_connection(
            host, port, ssl=ctx, server_hostname=server_hostname, limit=limit
        )
    loop = asyncio.get_running_loop()  # as asyncio.open_connection, with our protocol
    protocol: ReceiveInto
    if frames is None or not _receive.FRAMES:  # without the reader's internals: plain
        reader = asyncio.StreamReader(limit=limit, loop=loop)
        protocol = ReceiveInto(reader, limit)
    else:
        reader = FrameReader(limit, loop)
        protocol = ReceiveFrames(reader, limit, frames[0], max_frame_size=frames[1])
    transport, _ = await loop.create_connection(
        lambda: protocol, host, port, ssl=ctx, server_hostname=server_hostname
    )
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


async def open_tcp(
    host: str,
    port: int,
    *,
    tls: TLSOptions | ssl.SSLContext | None = None,
    timeout: float | None,
    read_size: int = DEFAULT_READ_SIZE,
    receive_into: bool = False,
    frames: FrameSpec | None = None,
    max_frame_size: int | None = None,
    server_hostname: str | None = None,
    keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
) -> TcpStream:
    """Connect to ``host:port`` (TLS if ``tls`` is given) and return the stream.

    ``receive_into``: the socket is read into one buffer of the connection's (as large as
    the reads, at least 64 KiB) reused for every receive, instead of a fresh object per
    receive; reads return the same bytes either way. For connections that receive large
    replies back to back.

    ``frames`` (implies ``receive_into``): the wire's frame layout. A frame of at least 64
    KiB (``GATHER_ABOVE``) is then received straight into a buffer of its own size and one
    :meth:`TcpStream.read` returns it whole, as ``bytes``, whatever ``read_size`` is
    (:mod:`streamwire.transport._receive`); ``max_frame_size`` bounds that buffer (a frame
    announcing more is left to the caller's decoder, through the ordinary reads).
    :meth:`TcpStream.read_exactly` is not for such a stream.

    ``timeout`` covers DNS, TCP and the TLS handshake together; ``None`` means no limit
    (the OS and asyncio's 60 s TLS handshake limit still apply). Callers with a larger
    budget pass ``deadline.remaining()``. The server name checked against the certificate
    is ``tls.server_hostname`` if set, else ``server_hostname`` if given, else ``host``.

    ``keepalive``: TCP keepalive and TCP_USER_TIMEOUT (:class:`TcpKeepalive`; ``None``:
    the system's, which notices a silent peer after hours).

    Raises :class:`~streamwire.errors.ConnectTimeout` when the budget runs out and
    :class:`~streamwire.errors.ConnectError` (naming ``host:port``, chained to the
    original) for DNS failures, refused connections and TLS failures.

    Cancellation: the half-open socket is closed and ``CancelledError`` propagates.
    """
    if read_size <= 0:
        raise ConfigurationError(f"read_size must be positive, not {read_size}")
    if frames is not None and (max_frame_size is None or max_frame_size < frames.header_size):
        raise ConfigurationError("frames= needs a max_frame_size of at least its header")
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if isinstance(tls, ssl.SSLContext):
        ctx: ssl.SSLContext | None = tls
        server_hostname = server_hostname or host
    elif tls is not None:
        ctx = create_ssl_context(tls)
        server_hostname = tls.server_hostname or server_hostname or host
    else:
        ctx = server_hostname = None
    deadline = Deadline(timeout, exc_type=ConnectTimeout, what=f"connecting to {target}")
    async with deadline.scope():
        with map_errors("connect", target=target):
            reader, writer = await _connect(
                host,
                port,
                max(read_size, DEFAULT_READ_SIZE),
                receive_into,
                None if frames is None else (frames, max_frame_size or 0),
                ctx,
                server_hostname,
            )
    stream = TcpStream(reader, writer, read_size=read_size, target=target)
    if keepalive is not None:
        _set_keepalive(writer, keepalive)
    logger.debug("connected to %s (tls=%s)", target, ctx is not None)
    return stream


def _set_keepalive(writer: asyncio.StreamWriter, keepalive: TcpKeepalive) -> None:
    """Turn TCP keepalive on with ``keepalive``'s timing, and TCP_USER_TIMEOUT, where the
    platform has them (an option it lacks or refuses is left as it is)."""
    sock = writer.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    options = [
        (socket.SOL_SOCKET, "SO_KEEPALIVE", 1),
        (socket.IPPROTO_TCP, "TCP_KEEPIDLE", max(1, round(keepalive.idle))),
        (socket.IPPROTO_TCP, "TCP_KEEPINTVL", max(1, round(keepalive.interval))),
        (socket.IPPROTO_TCP, "TCP_KEEPCNT", max(1, keepalive.count)),
        (socket.IPPROTO_TCP, "TCP_USER_TIMEOUT", max(1, round(keepalive.user_timeout * 1000))),
    ]
    for level, name, value in options:
        option = getattr(socket, name, None)
        if option is None:
            continue
        with contextlib.suppress(OSError):
            sock.setsockopt(level, option, value)


def _set_nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _address(raw: Any) -> tuple[str, int]:
    if isinstance(raw, tuple) and len(raw) >= 2:
        return (str(raw[0]), int(raw[1]))
    return (str(raw), 0)


class TcpStream:
    """A connected TCP/TLS stream; implements :class:`~streamwire.transport.base.ByteStream`.

    Use :func:`open_tcp` to create one. ``async with`` closes it.
    """

    __slots__ = (
        "_close_done",
        "_closed",
        "_protocol",
        "_read_size",
        "_reader",
        "_send_lock",
        "_target",
        "_writer",
        "local",
        "peer",
    )

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        read_size: int = DEFAULT_READ_SIZE,
        target: str | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        # kept: asyncio drops the transport's protocol once the connection is lost
        self._protocol = writer.transport.get_protocol()
        self._read_size = read_size
        self._send_lock = asyncio.Lock()
        self._closed = False
        self._close_done = asyncio.Event()
        #: The remote address as ``(host, port)``.
        self.peer = _address(writer.get_extra_info("peername"))
        #: The local address as ``(host, port)``.
        self.local = _address(writer.get_extra_info("sockname"))
        self._target = target or f"{self.peer[0]}:{self.peer[1]}"
        _set_nodelay(writer)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<TcpStream {self._target} {state}>"

    async def __aenter__(self) -> TcpStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def read_size(self) -> int:
        """The most bytes one :meth:`read` returns (but for a whole frame, see ``frames=``)."""
        return self._read_size

    @property
    def is_closing(self) -> bool:
        """True once closed locally or when the transport is shutting down."""
        return self._closed or self._writer.is_closing()

    @property
    def first_bytes(self) -> bytes:
        """The first bytes the peer sent (up to 16; empty before any): who answered, for
        the message of a failed handshake."""
        return getattr(self._protocol, "first", b"")

    @property
    def backlogged(self) -> bool:
        """True while the transport's send buffer is above its high-water mark (asyncio's
        public ``get_write_buffer_size`` and ``get_write_buffer_limits``)."""
        transport = self._writer.transport
        return transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]

    @property
    def ssl_object(self) -> ssl.SSLObject | None:
        """The TLS session (peer certificate, cipher, version), or ``None`` for plain TCP."""
        obj = self._writer.get_extra_info("ssl_object")
        return obj if isinstance(obj, ssl.SSLObject) else None

    def _limit(self, timeout: float | None, verb: str) -> DeadlineScope:
        what = f"{verb} {self._target}"
        return Deadline(timeout, exc_type=TimeoutError, what=what).scope()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"the stream to {self._target} is closed")

    async def read(self, timeout: float | None = None) -> bytes:
        """Up to :attr:`read_size` bytes as they arrive (or one whole large frame, opened with
        ``frames=``); ``b""`` on a clean end of stream.

        ``b""`` is also what a read pending while the stream is closed locally returns.

        Raises :class:`~streamwire.errors.ConnectionClosed` if the peer reset the
        connection, :class:`~streamwire.errors.ReadError` for other failures and
        :class:`streamwire.errors.TimeoutError` if nothing arrived within ``timeout``.

        Cancellation: no bytes are consumed; the stream stays usable.
        """
        self._check_open()
        if timeout is None:
            with map_errors("read", target=self._target):
                return await self._reader.read(self._read_size)
        async with self._limit(timeout, "read from"):
            with map_errors("read", target=self._target):
                return await self._reader.read(self._read_size)

    async def read_exactly(self, n: int, timeout: float | None = None) -> bytes:
        """Exactly ``n`` bytes; :class:`~streamwire.errors.ConnectionClosed` on early EOF.

        Cancellation: no bytes are consumed; the stream stays usable.
        """
        self._check_open()
        if isinstance(self._reader, FrameReader):
            raise ConfigurationError("read_exactly() on a stream opened with frames=")
        async with self._limit(timeout, "read from"):
            with map_errors("read", target=self._target):
                return await self._reader.readexactly(n)

    def write(self, data: BytesLike) -> None:
        """Append ``data`` to the send buffer, whole; never blocks. Follow with :meth:`drain`.

        Raises :class:`~streamwire.errors.ClosedError` after :meth:`aclose`/:meth:`abort`
        and :class:`~streamwire.errors.ConnectionClosed` if the connection was lost.
        """
        self._check_writable()
        self._writer.write(data)

    def writelines(self, parts: Iterable[BytesLike]) -> None:
        """Append several buffers, in order, as one write. Same errors as :meth:`write`."""
        self._check_writable()
        self._writer.writelines(parts)

    def _check_writable(self) -> None:
        self._check_open()
        if self._writer.is_closing():
            cause = self._reader.exception()
            raise ConnectionClosed(f"connection to {self._target} lost") from cause

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until the send buffer is below its high-water mark (flow control).

        Raises :class:`~streamwire.errors.ConnectionClosed` / :class:`WriteError` on failure
        and :class:`streamwire.errors.TimeoutError` after ``timeout``.

        Cancellation: buffered bytes stay buffered and still go out; only the wait stops.
        """
        self._check_open()
        if timeout is None:  # no scope to enter: drain() runs once per request sent
            with map_errors("write", target=self._target):
                await self._writer.drain()
            return
        async with self._limit(timeout, "write to"):
            with map_errors("write", target=self._target):
                await self._writer.drain()

    async def send(
        self, data: BytesLike | Iterable[BytesLike], timeout: float | None = None
    ) -> None:
        """Write a frame (or several frames, kept together) and drain, under the write lock.

        ``timeout`` covers waiting for the lock and draining.

        Cancellation: while waiting for the lock nothing has been written; after that the
        whole frame is already in the buffer (it is never split), so cancelling only stops
        the wait for the drain. Concurrent senders never interleave their bytes.
        """
        self._check_open()
        async with self._limit(timeout, "send to"), self._send_lock:
            if isinstance(data, bytes | bytearray | memoryview):
                self.write(data)
            else:
                self.writelines(data)
            with map_errors("write", target=self._target):
                await self._writer.drain()

    async def aclose(self, timeout: float = 1.0) -> None:
        """Flush what is buffered, close (TLS close_notify included) and wait up to ``timeout``.

        If closing takes longer, the connection is aborted instead; no error is raised.
        Idempotent: later calls wait (up to their ``timeout``) for the first to finish.

        Cancellation: the connection is aborted, then ``CancelledError`` propagates.
        """
        if self._closed:
            with contextlib.suppress(builtins.TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._close_done.wait()
            return
        self._closed = True
        try:
            self._writer.close()
            async with asyncio.timeout(timeout):
                await self._writer.wait_closed()
        except builtins.TimeoutError:
            logger.debug("closing %s took over %g s; aborting", self._target, timeout)
            self._writer.transport.abort()
        except OSError as exc:  # the peer had already broken the connection: still closed
            logger.debug("error while closing %s: %r", self._target, exc)
        except BaseException:
            self._writer.transport.abort()
            raise
        finally:
            self._close_done.set()

    def abort(self) -> None:
        """Close at once, discarding anything unsent. Idempotent."""
        self._closed = True
        self._writer.transport.abort()
        self._close_done.set()
