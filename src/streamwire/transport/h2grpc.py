"""gRPC calls over streamwire's own HTTP/2 client: the asyncio side of
:mod:`streamwire.transport.h2machine`.

grpc-python reads a server stream one message at a time (a completion-queue operation and
a few Python calls per message, ~7 µs each); here the socket is read by a
:class:`~streamwire.transport.driver.Driver` and every gRPC message a read completed reaches
its call's sink in one call. The pieces:

* :class:`H2Channel`: one connection (a :class:`~streamwire.transport.tcp.TcpStream`, the
  machine, the driver's reader and timer tasks: keepalive PINGs and their timeout). It
  carries any number of calls, up to the server's SETTINGS_MAX_CONCURRENT_STREAMS; a
  channel whose last call ended closes after :data:`IDLE_CLOSE` seconds without a new one.
* :class:`H2Pool`: the channels of one client, shared by its calls as grpcio's channel
  shares its connection: a call goes on an open channel to the same server (host, port,
  TLS) when one has room, else on a new one. A server that sends GOAWAY ENHANCE_YOUR_CALM
  "too_many_pings" gets half as many pings on its next connections (grpc's clients do
  the same).
* :class:`GrpcStreamProtocol`: one call: ``ended`` resolves with the :class:`CallEnded`
  that ended it (status 0 for a normal end), ``failure`` is what ``split`` raised if that
  ended it, messages go to ``sink`` as ``split`` decodes them, and received bytes are
  credited back to the server only while the sink has room. ``cancel()`` resets the
  stream (RST_STREAM CANCEL); the connection stays for the other calls.
* :func:`open_call`: connect (or reuse) and start a call; without a pool the call has a
  connection of its own, closed when the call ends.

Nothing here is specific to a service: the caller gives the path, the request bytes and a
``split`` function that turns a buffer of DATA bytes into decoded messages
(:func:`~streamwire.transport.h2wire.split_messages` is the plain one).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import ssl
from collections.abc import Callable
from typing import Any, Final, Generic, Protocol, TypeVar

from streamwire.errors import ConnectionClosed, StreamwireError
from streamwire.transport import h2wire as w
from streamwire.transport.driver import Driver
from streamwire.transport.h2machine import (
    ConnectionEnded,
    Event,
    Flushed,
    H2Machine,
    H2Settings,
    Messages,
    Opened,
    Split,
    StreamEnded,
)
from streamwire.transport.h2wire import (
    ACK,
    ALPN,
    CONTINUATION,
    DATA,
    DEFAULT_WINDOW,
    END_HEADERS,
    END_STREAM,
    GOAWAY,
    HEADERS,
    MIN_FRAME,
    PADDED,
    PING,
    PREFACE,
    PRIORITY_FLAG,
    PUSH_PROMISE,
    RST_STREAM,
    SETTINGS,
    SETTINGS_INITIAL_WINDOW_SIZE,
    SETTINGS_MAX_FRAME_SIZE,
    WINDOW_UPDATE,
    CallEnded,
    ErrorCode,
    NotHttp2,
    Status,
    encode_frame,
    gather_data,
    gather_data_pure,
    split_messages,
)
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive, open_tcp

__all__ = (
    "ACK",
    "ALPN",
    "CONTINUATION",
    "DATA",
    "DEFAULT_WINDOW",
    "END_HEADERS",
    "END_STREAM",
    "GOAWAY",
    "HEADERS",
    "IDLE_CLOSE",
    "MIN_FRAME",
    "PADDED",
    "PING",
    "PREFACE",
    "PRIORITY_FLAG",
    "PUSH_PROMISE",
    "RST_STREAM",
    "SETTINGS",
    "SETTINGS_INITIAL_WINDOW_SIZE",
    "SETTINGS_MAX_FRAME_SIZE",
    "WINDOW_UPDATE",
    "CallEnded",
    "ErrorCode",
    "GrpcStreamProtocol",
    "H2Channel",
    "H2Pool",
    "H2Settings",
    "NotHttp2",
    "Sink",
    "Status",
    "alpn_context",
    "authority",
    "encode_frame",
    "gather_data",
    "gather_data_pure",
    "open_call",
    "split_messages",
)

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

IDLE_CLOSE: Final = 30.0
"""Seconds a pooled connection without calls stays open for the next one."""
_READ_SIZE: Final = 256 * 1024


class Sink(Protocol[_T]):
    """Where a call's messages go."""

    def deliver(self, messages: list[_T], nbytes: int) -> None:
        """Messages decoded from ``nbytes`` bytes of gRPC messages (prefixes included)."""

    def credit(self) -> bool:
        """Whether the sink has room: received bytes are credited back only then."""


class GrpcStreamProtocol(Generic[_T]):
    """One gRPC call (see the module notes). ``request`` given: a server-streaming call
    whose one request ends the client's side; None: the caller writes (``h2call``).
    ``window`` and ``scheme`` apply to a connection of the call's own (no pool); a pooled
    call uses its pool's settings. ``loop`` and ``authority`` are accepted for the
    callers that give them (the connection knows both)."""

    def __init__(
        self,
        *,
        path: str,
        request: bytes | None,
        split: Split,
        sink: Sink[_T],
        loop: asyncio.AbstractEventLoop | None = None,
        authority: str | None = None,
        scheme: str = "http",
        window: int = 1 << 20,
        max_message: int = 64 << 20,
        user_agent: str = "streamwire",
    ) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self.path = path
        self._request = request
        self._split = split
        self._sink = sink
        self.authority = authority
        self.scheme = scheme
        self.window = window
        self.max_message = max_message
        self.user_agent = user_agent
        self.channel: H2Channel | None = None
        self.stream_id = 0
        self.failure: Exception | None = None
        """What ``split`` raised, if that ended the call."""
        self.not_http2 = False
        """The server answered, but not in HTTP/2 (TLS without ``h2`` by ALPN, or a first
        frame that was not SETTINGS); a connection lost before SETTINGS is not that."""
        self.opened: asyncio.Future[None] = self._loop.create_future()
        """Resolves once the server's SETTINGS arrived (or raises :class:`NotHttp2` or the
        call's :class:`CallEnded`)."""
        self.ended: asyncio.Future[CallEnded] = self._loop.create_future()

    # --- the channel's side ----------------------------------------------------------

    def _started(self, channel: H2Channel, stream_id: int) -> None:
        self.channel, self.stream_id = channel, stream_id
        if channel.machine.opened:
            _resolve(self.opened, None)

    def _opened(self) -> None:
        _resolve(self.opened, None)

    def _deliver(self, messages: list[_T], nbytes: int) -> None:
        if self.ended.done():
            return
        try:
            self._sink.deliver(messages, nbytes)
        except Exception as exc:
            self._sink_failed(exc)

    def _has_room(self) -> bool:
        if self.ended.done():
            return False
        try:
            return self._sink.credit()
        except Exception as exc:
            self._sink_failed(exc)
            return False

    def _sink_failed(self, exc: Exception) -> None:
        """The sink raised (a bug in what reads this call): this call ends INTERNAL with
        RST_STREAM, and the calls sharing its connection go on (the exception used to reach
        the connection's reader and end every call on it)."""
        logger.error("gRPC call %s: its reader failed; ending this call", self.path, exc_info=exc)
        channel = self.channel
        if channel is not None:
            channel.reset(self.stream_id)
        self._end(CallEnded(Status.INTERNAL, f"the call's reader failed: {exc!r}"), exc)

    def _flushed(self) -> None:
        """Send windows opened (a call that writes wakes its writers)."""

    def _end(
        self,
        ended: CallEnded,
        failure: Exception | None = None,
        *,
        not_http2: bool = False,
        early: bool = False,
    ) -> None:
        """The call is over. ``not_http2``: the server answered, but not in HTTP/2;
        ``early``: the connection ended before the server's SETTINGS (as likely an HTTP/1
        server closing on the preface: :attr:`opened` raises :class:`NotHttp2` too)."""
        if failure is not None and self.failure is None:
            self.failure = failure
        if not_http2:
            self.not_http2 = True
        if not self.ended.done():
            self.ended.set_result(ended)
        if not self.opened.done():
            exc: Exception = ended
            if not_http2 or early:
                exc = NotHttp2(f"no HTTP/2 SETTINGS from the server ({ended.message})")
            self.opened.set_exception(exc)
            self.opened.exception()  # retrieved: nobody may be waiting any more

    # --- the caller's side -----------------------------------------------------------

    def give_credit(self) -> None:
        """Credit the bytes received so far back to the server."""
        channel = self.channel
        if channel is not None and not self.ended.done():
            channel.credit(self.stream_id)

    def credit_owed(self) -> bool:
        """Whether enough bytes wait to be credited for a WINDOW_UPDATE to be worth it."""
        channel = self.channel
        return channel is not None and channel.machine.credit_owed(self.stream_id)

    def cancel(self) -> None:
        """End the call locally: RST_STREAM CANCEL (the connection stays for the others;
        one of the call's own closes). Idempotent."""
        channel = self.channel
        if channel is not None and not self.ended.done():
            channel.reset(self.stream_id)
        self._end(CallEnded(Status.CANCELLED, "cancelled locally"))


class H2Channel(Driver[H2Machine, Event, int]):
    """One HTTP/2 connection and the calls on it (see the module notes)."""

    wire = "http2"

    def __init__(
        self,
        stream: Any,
        machine: H2Machine,
        address: str,
        *,
        own: bool = False,
        on_end: Callable[[H2Channel, ConnectionEnded | None], None] | None = None,
    ) -> None:
        super().__init__(stream, machine, address)
        self.calls: dict[int, GrpcStreamProtocol[Any]] = {}
        self._own = own  # one call's connection: it closes when that call ends
        self._on_end = on_end
        self._idle: asyncio.TimerHandle | None = None

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        settings: H2Settings,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        timeout: float | None,
        own: bool = False,
        on_end: Callable[[H2Channel, ConnectionEnded | None], None] | None = None,
        keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
    ) -> H2Channel:
        """Connect and send the preface. Raises ``ConnectError``/``ConnectTimeout``, or
        :class:`NotHttp2` when TLS did not agree to ``h2``. Cancellation: nothing is left
        open."""
        stream = await open_tcp(
            host,
            port,
            tls=ssl_context,
            server_hostname=server_hostname,
            timeout=timeout,
            read_size=_READ_SIZE,
            receive_into=True,
            keepalive=keepalive,
        )
        try:
            if ssl_context is not None:
                ssl_object = stream.ssl_object
                if ssl_object is None or ssl_object.selected_alpn_protocol() != ALPN:
                    raise NotHttp2("the server did not agree to HTTP/2 (ALPN h2)")
            scheme = "https" if ssl_context is not None else "http"
            machine = H2Machine(
                settings, authority=authority(host, port, server_hostname), scheme=scheme
            )
            machine.start(asyncio.get_running_loop().time())
            address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            channel = cls(stream, machine, address, own=own, on_end=on_end)
            channel.write_now()
            channel._start_tasks()
        except BaseException:
            stream.abort()
            raise
        return channel

    # --- calls ---------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """Whether another call may start here."""
        return self.error is None and not self._closing and self.machine.can_open

    def start(self, call: GrpcStreamProtocol[Any]) -> None:
        """Start ``call`` on this connection (:attr:`usable` must be True)."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        sid = self.machine.open_stream(
            call.path, call._split, request=call._request, max_message=call.max_message
        )
        self.calls[sid] = call
        call._started(self, sid)
        self.write_now()
        self._deadline_moved()  # keepalive runs while calls are open

    def send(self, stream_id: int, messages: list[bytes]) -> None:
        self.machine.send(stream_id, messages)
        self.write_now()

    def end_stream(self, stream_id: int) -> None:
        self.machine.end_stream(stream_id)
        self._write_quietly()

    def credit(self, stream_id: int) -> None:
        self.machine.credit(stream_id)
        self._write_quietly()

    def reset(self, stream_id: int) -> None:
        """RST_STREAM CANCEL for a call given up on."""
        self.calls.pop(stream_id, None)
        if self.machine.reset(stream_id):
            self._write_quietly()
        self._maybe_idle()

    def _write_quietly(self) -> None:
        with contextlib.suppress(StreamwireError):  # the end reaches every call anyway
            self.write_now()

    # --- the driver's part ---------------------------------------------------------------

    def _dispatch(self, events: list[Event]) -> None:
        machine, calls = self.machine, self.calls
        # what came in may move the keepalive deadline earlier (a PING's ACK: from its
        # timeout back to the next PING); the timer only wakes by itself at the later one
        self._deadline_moved()
        for event in events:
            kind = type(event)
            if kind is Messages:
                assert isinstance(event, Messages)
                call = calls.get(event.stream_id)
                if call is not None:
                    call._deliver(event.messages, event.nbytes)
            elif kind is StreamEnded:
                assert isinstance(event, StreamEnded)
                call = calls.pop(event.stream_id, None)
                if call is not None:
                    dead = machine.ended  # the connection's end comes after its calls'
                    call._end(
                        event.ended,
                        event.failure,
                        not_http2=dead is not None and dead.not_http2,
                        early=dead is not None and not machine.opened,
                    )
                self._maybe_idle()
            elif kind is Flushed:
                assert isinstance(event, Flushed)
                call = calls.get(event.stream_id)
                if call is not None:
                    call._flushed()
            elif kind is Opened:
                for call in calls.values():
                    call._opened()
            elif kind is ConnectionEnded:
                assert isinstance(event, ConnectionEnded)
                self._write_quietly()  # the GOAWAY, RST_STREAMs
                self._end_calls(event.ended, not_http2=event.not_http2)
                if self._on_end is not None:
                    self._on_end(self, event)
                    self._on_end = None
                why = ConnectionClosed(f"HTTP/2 to {self.address}: {event.ended.message}")
                # a GOAWAY sent or received: the reader closes the socket once it is out;
                # otherwise (keepalive timeout, end of stream) nothing is left to send
                self._fail(why, abort=event.error_code is None)
                return
        # credit every call whose reader has room (also one inside a message larger than
        # the window: it must be credited before it can complete)
        for sid, call in list(calls.items()):  # a sink that fails leaves `calls`
            if machine.credit_owed(sid) and call._has_room():
                machine.credit(sid)

    def _ended(self) -> None:
        """The connection ended (read error, close, abort): every call that is still open
        ends UNAVAILABLE."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        error = self.error
        why = error.args[0] if error is not None and error.args else "connection lost"
        self._end_calls(CallEnded(Status.UNAVAILABLE, str(why)))
        if self._on_end is not None:
            self._on_end(self, self.machine.ended)
            self._on_end = None

    def _end_calls(self, ended: CallEnded, *, not_http2: bool = False) -> None:
        calls, self.calls = self.calls, {}
        early = not self.machine.opened  # before the server's SETTINGS: maybe not HTTP/2
        for call in calls.values():
            call._end(CallEnded(ended.code, ended.message), not_http2=not_http2, early=early)

    def _maybe_idle(self) -> None:
        """The last call ended: a connection of one call's own closes now, a pooled one
        after :data:`IDLE_CLOSE` seconds without a new call."""
        if self.calls or self._closing or self.error is not None:
            return
        if self._own:
            self._spawn(self.close(timeout=1.0), f"streamwire-http2-close {self.address}")
        elif self._idle is None:
            self._idle = self._loop.call_later(IDLE_CLOSE, self._close_idle)

    def _close_idle(self) -> None:
        self._idle = None
        if not self.calls and self.error is None and not self._closing:
            self._spawn(self.close(timeout=1.0), f"streamwire-http2-close {self.address}")

    async def _goodbye(self, timeout: float) -> None:
        self.machine.goodbye()
        await self.flush()


_Key = tuple[str, int, int, str | None]


class H2Pool:
    """The HTTP/2 connections of one client, shared by its calls (see the module notes)."""

    def __init__(
        self,
        settings: H2Settings | None = None,
        *,
        tcp_keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
    ) -> None:
        self.settings = settings or H2Settings()
        self.tcp_keepalive = tcp_keepalive
        self._channels: dict[_Key, list[H2Channel]] = {}
        self._locks: dict[_Key, asyncio.Lock] = {}
        self._keepalive: dict[_Key, float] = {}  # after "too_many_pings"
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def channels(self) -> list[H2Channel]:
        """The open connections."""
        return [c for group in self._channels.values() for c in group]

    async def start(
        self,
        call: GrpcStreamProtocol[Any],
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        timeout: float | None,
    ) -> None:
        """Start ``call`` on a connection to ``host:port`` with room for it, connecting
        one if none has. Raises as :meth:`H2Channel.connect`; ``ClosedError``-like
        ``ConnectionClosed`` once the pool is closed."""
        if self._closed:
            raise ConnectionClosed("the HTTP/2 connections are closed")
        key: _Key = (host, port, id(ssl_context), server_hostname)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            group = self._channels.setdefault(key, [])
            channel = next((c for c in group if c.usable), None)
            if channel is None:
                settings = self.settings
                if key in self._keepalive:
                    settings = dataclasses.replace(settings, keepalive_time=self._keepalive[key])

                def gone(ch: H2Channel, how: ConnectionEnded | None) -> None:
                    with contextlib.suppress(ValueError):
                        group.remove(ch)
                    if how is not None and how.too_many_pings:
                        current = ch.machine.settings.keepalive_time
                        if current is not None:
                            self._keepalive[key] = current * 2
                            logger.info(
                                "%s: the server finds the keepalive pings too frequent; "
                                "every %.0f s from now on",
                                ch.address,
                                current * 2,
                            )

                channel = await H2Channel.connect(
                    host,
                    port,
                    settings,
                    ssl_context=ssl_context,
                    server_hostname=server_hostname,
                    timeout=timeout,
                    on_end=gone,
                    keepalive=self.tcp_keepalive,
                )
                if self.closed:  # closed while connecting
                    channel.abort()
                    raise ConnectionClosed("the HTTP/2 connections are closed")
                group.append(channel)
            channel.start(call)

    async def aclose(self) -> None:
        """Close every connection (GOAWAY, then the socket). Idempotent."""
        self._closed = True
        channels = self.channels()
        self._channels.clear()
        for channel in channels:
            await channel.close(timeout=1.0)


_P = TypeVar("_P", bound="GrpcStreamProtocol[Any]")


async def open_call(
    factory: Callable[[], _P],
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None,
    timeout: float | None,
    wait_settings: bool = True,
    pool: H2Pool | None = None,
) -> _P:
    """Start the call ``factory`` makes on a connection to ``host:port`` (of ``pool``'s, or
    of its own) and return it once the server's SETTINGS arrived (with
    ``wait_settings=False``, once started: a client may send before the server's SETTINGS,
    within the default windows). Raises ``ConnectError``/``ConnectTimeout`` (connecting),
    :class:`NotHttp2` or :class:`CallEnded`. Cancellation or a failure ends the call (and
    a connection of its own)."""
    call = factory()
    try:
        async with asyncio.timeout(timeout):
            if pool is not None:
                await pool.start(
                    call,
                    host,
                    port,
                    ssl_context=ssl_context,
                    server_hostname=server_hostname,
                    timeout=timeout,
                )
            else:
                settings = H2Settings(
                    window=call.window,
                    connection_window=max(call.window, DEFAULT_WINDOW),
                    user_agent=call.user_agent,
                )
                channel = await H2Channel.connect(
                    host,
                    port,
                    settings,
                    ssl_context=ssl_context,
                    server_hostname=server_hostname,
                    timeout=timeout,
                    own=True,
                )
                channel.start(call)
            if wait_settings or call.opened.done():
                await call.opened
        return call
    except NotHttp2:
        call.not_http2 = True
        call.cancel()
        raise
    except BaseException:
        call.cancel()
        raise


def authority(host: str, port: int, server_hostname: str | None = None) -> str:
    """The ``:authority`` of a call to ``host:port`` (the TLS server name when given)."""
    if server_hostname is not None:
        return server_hostname
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def alpn_context(context: ssl.SSLContext) -> ssl.SSLContext:
    """``context`` offering HTTP/2 by ALPN (changed in place, returned)."""
    with contextlib.suppress(NotImplementedError):
        context.set_alpn_protocols([ALPN])
    return context


def _resolve(future: asyncio.Future[Any], value: object) -> None:
    if not future.done():
        future.set_result(value)


_ = w  # the wire module is this module's vocabulary (re-exported above)
