"""The asyncio driver of one RabbitMQ Streams connection.

The reader and heartbeat tasks, the in-flight table, the end and closing are the shared
driver core (:mod:`streamwire.transport.driver`); this module adds the wire: the handshake,
what each event of the sans-IO machine means, Close, and the producers and consumers
registered per publisher/subscription id. When the connection ends, every waiter and every
registered listener learns why, through one recorded exception.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

from streamwire.codec.framing import LENGTH_PREFIX_U32
from streamwire.errors import (
    ClosedError,
    ConnectError,
    ConnectionClosed,
    ConnectTimeout,
    RemoteProtocolError,
    StreamwireError,
)
from streamwire.rabbitmq.protocol import events as ev
from streamwire.rabbitmq.protocol._frame import Frame
from streamwire.rabbitmq.protocol.constants import ResponseCode
from streamwire.rabbitmq.protocol.consuming import (
    QueryOffsetRequest,
    QueryOffsetResponse,
    UnsubscribeRequest,
)
from streamwire.rabbitmq.protocol.errors import ERRORS, NoOffset
from streamwire.rabbitmq.protocol.machine import (
    ConnectionSettings,
    ProtocolFailed,
    StreamsConnection,
)
from streamwire.rabbitmq.protocol.publishing import DeletePublisherRequest
from streamwire.transport.deadline import Deadline
from streamwire.transport.driver import Driver
from streamwire.transport.peers import handshake_failure
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive, TcpStream, open_tcp
from streamwire.transport.tls import TLSConfig

__all__ = ("Connection", "ConnectionListener")

logger = logging.getLogger(__name__)

_R = TypeVar("_R", bound=Frame)

DEFAULT_REQUEST_TIMEOUT = 30.0


class ConnectionListener(Protocol):
    """What producers and consumers registered on a connection hear about."""

    def connection_lost(self, exc: StreamwireError) -> None: ...

    def metadata_changed(self, stream: str, code: int) -> None: ...


class PublisherListener(ConnectionListener, Protocol):
    def confirmed(self, publishing_ids: tuple[int, ...]) -> None: ...

    def errored(self, errors: tuple[tuple[int, int], ...]) -> None: ...


class SubscriberListener(ConnectionListener, Protocol):
    def chunk_delivered(self, event: ev.ChunkDelivered) -> None: ...

    def credit_failed(self, code: int) -> None: ...

    def consumer_update(self, event: ev.ConsumerUpdateRequested) -> None: ...


class Connection(Driver[StreamsConnection, ev.Event, int]):
    """An open connection. Create with :meth:`open`; close with :meth:`close`."""

    idle_wait = 1.0
    wire = "rmq"

    def __init__(self, stream: TcpStream, machine: StreamsConnection, address: str) -> None:
        super().__init__(stream, machine, address)
        self._publishers: dict[int, PublisherListener] = {}
        self._subscribers: dict[int, SubscriberListener] = {}
        self.opened: ev.ConnectionOpened | None = None
        self._first_bytes = b""  # what the server sent first (telling a wrong port)

    # --- opening -------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        settings: ConnectionSettings,
        *,
        tls: TLSConfig | None = None,
        timeout: float | None = 30.0,
        keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
    ) -> Connection:
        """Connect and run the whole handshake within one ``timeout`` budget.

        Cancellation: the socket is closed; nothing is left running.
        """
        address = f"{host}:{port}"
        deadline = Deadline(timeout, exc_type=ConnectTimeout, what=f"connecting to {address}")
        # Deliver frames carry whole chunks (often a megabyte or more): read in large pieces,
        # and each large frame straight into one buffer of its size (streamwire.transport.
        # _receive), which the machine decodes in place
        stream = await open_tcp(
            host,
            port,
            tls=tls,
            timeout=deadline.remaining(),
            read_size=1 << 20,
            frames=LENGTH_PREFIX_U32,
            max_frame_size=settings.max_inbound_frame_bytes,
            keepalive=keepalive,
        )
        machine = StreamsConnection(settings)
        self = cls(stream, machine, address)
        try:
            async with deadline.scope():
                await self._handshake()
        except StreamwireError as exc:
            stream.abort()
            better = handshake_failure(address, "RabbitMQ Streams", exc, self._first_bytes)
            if better is not None:
                raise better from exc
            raise
        except BaseException:
            stream.abort()
            raise
        self._start_tasks()
        return self

    async def _handshake(self) -> None:
        machine = self._machine
        machine.start(self._loop.time())
        first = True
        while True:
            self._stream.write(machine.data_to_send())
            await self._stream.drain()
            data = await self._stream.read()
            if first and data[:1] in (b"\x15", b"\x16") and data[1:2] == b"\x03":
                raise ConnectError(
                    f"{self.address} answered with TLS: use rabbitmq-stream+tls:// or tls="
                )
            if first:
                self._first_bytes = bytes(data[:16])
            first = False
            for event in machine.receive_data(data, self._loop.time()):
                if isinstance(event, ev.ConnectionOpened):
                    self.opened = event
                    self._stream.write(machine.data_to_send())
                    return
                if isinstance(event, ev.HandshakeFailed):
                    raise event.error
                if isinstance(event, ProtocolFailed):
                    raise event.error
                if isinstance(event, ev.CloseRequested):
                    raise ERRORS.from_code(event.code, event.reason)
                if isinstance(event, ev.ConnectionClosedByPeer):
                    raise ConnectionClosed(f"{self.address} closed the connection during handshake")

    # --- state ---------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._error is None and self._machine.is_open

    @property
    def frame_max(self) -> int:
        return self._machine.frame_max

    def check(self) -> None:
        """Raise the recorded reason if the connection is no longer usable."""
        super().check()
        if not self._machine.is_open:
            raise ClosedError(f"connection to {self.address} is {self._machine.state.value}")

    # --- listeners -----------------------------------------------------------------------

    def add_publisher(self, publisher_id: int, listener: PublisherListener) -> None:
        self._publishers[publisher_id] = listener

    def remove_publisher(self, publisher_id: int) -> None:
        self._publishers.pop(publisher_id, None)

    @property
    def publisher_room(self) -> bool:
        """Whether another publisher fits (ids are one byte: 256 per connection)."""
        return len(self._publishers) < 256

    @property
    def subscriber_room(self) -> bool:
        """Whether another subscription fits (ids are one byte: 256 per connection)."""
        return len(self._subscribers) < 256

    def free_publisher_id(self) -> int:
        for pid in range(256):
            if pid not in self._publishers:
                return pid
        raise ClosedError("256 publishers already use this connection")

    def add_subscriber(self, subscription_id: int, listener: SubscriberListener) -> None:
        self._subscribers[subscription_id] = listener

    def remove_subscriber(self, subscription_id: int) -> None:
        self._subscribers.pop(subscription_id, None)

    def free_subscription_id(self) -> int:
        for sid in range(256):
            if sid not in self._subscribers:
                return sid
        raise ClosedError("256 subscriptions already use this connection")

    # --- sending -------------------------------------------------------------------------

    def send_nowait(self, frame: Frame | bytes) -> None:
        """Write a small one-way frame (Credit, StoreOffset) now, without waiting for flow
        control; ``bytes`` are a frame encoded in advance. Whatever else the machine had
        queued goes out with it, in order."""
        self.check()
        if isinstance(frame, bytes):
            self._machine.send_encoded(frame)
        else:
            self._machine.send(frame)
        self.write_now()

    def drop_publisher(self, publisher_id: int) -> None:
        """Forget a publisher and delete it on the broker without waiting for the answer
        (a producer's abort): the id can be used again at once, as the broker handles the
        frames of a connection in order."""
        self.remove_publisher(publisher_id)
        self._request_nowait(lambda corr: DeletePublisherRequest(corr, publisher_id))

    def drop_subscriber(self, subscription_id: int) -> None:
        """Forget a subscription and unsubscribe without waiting (a consumer's abort)."""
        self.remove_subscriber(subscription_id)
        self._request_nowait(lambda corr: UnsubscribeRequest(corr, subscription_id))

    def _request_nowait(self, make: Callable[[int], Frame]) -> None:
        """Send the request ``make(correlation_id)`` if the connection is open; its response
        is dropped when it comes."""
        if self.is_open:
            with contextlib.suppress(StreamwireError):
                self.send_nowait(make(self._machine.next_correlation_id()))

    async def send(self, frame: Frame) -> None:
        """Send a one-way frame (Credit, StoreOffset...).

        Cancellation: the frame is already queued whole and still goes out.
        """
        self.check()
        self._machine.send(frame)
        await self.flush()

    async def send_encoded(self, data: bytes) -> None:
        """Send pre-encoded frames (publishing) and wait for TCP flow control.

        Cancellation: the bytes are already buffered whole and still go out.
        """
        self.check()
        self._machine.send_encoded(data)
        await self.flush()

    async def request(
        self,
        make: Callable[[int], Frame],
        expect: type[_R],
        *,
        timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
        ok: tuple[int, ...] = (ResponseCode.OK,),
    ) -> _R:
        """Send the request ``make(correlation_id)`` and return its response, which must be
        an ``expect``.

        A response code outside ``ok`` raises the matching
        :class:`~streamwire.rabbitmq.protocol.errors.StreamsServerError`.

        Cancellation: the request may already have been sent; its response is dropped.
        """
        self.check()
        corr = self._machine.next_correlation_id()
        future = self._inflight.register(corr)
        try:
            self._machine.send(make(corr))
            await self.flush()
        except BaseException:
            self._inflight.discard(corr)
            raise
        response = await self._inflight.wait(corr, future, timeout)
        code = getattr(response, "code", ResponseCode.OK)
        if code not in ok:
            raise ERRORS.from_code(code)
        if not isinstance(response, expect):
            raise RemoteProtocolError(
                f"expected {expect.__name__}, got {type(response).__name__} (correlation {corr})"
            )
        return response

    async def query_offset(self, stream: str, name: str) -> int | None:
        """The offset consumer ``name`` stored on ``stream`` (QueryOffset; None: none)."""
        try:
            resp = await self.request(
                lambda corr: QueryOffsetRequest(corr, name, stream), QueryOffsetResponse
            )
        except NoOffset:
            return None
        return resp.offset

    # --- events ------------------------------------------------------------------------

    def _dispatch(self, events: list[ev.Event]) -> None:
        for event in events:
            if isinstance(event, ev.ChunkDelivered):
                sub = self._subscribers.get(event.subscription_id)
                if sub is not None:
                    sub.chunk_delivered(event)
            elif isinstance(event, ev.PublishConfirmed):
                pub = self._publishers.get(event.publisher_id)
                if pub is not None:
                    pub.confirmed(event.publishing_ids)
            elif isinstance(event, ev.ResponseReceived):
                self._inflight.resolve(event.correlation_id, event.frame)
            elif isinstance(event, ev.PublishErrored):
                pub = self._publishers.get(event.publisher_id)
                if pub is not None:
                    pub.errored(event.errors)
            elif isinstance(event, ev.MetadataChanged):
                for listener in [*self._publishers.values(), *self._subscribers.values()]:
                    listener.metadata_changed(event.stream, event.code)
            elif isinstance(event, ev.CreditFailed):
                sub = self._subscribers.get(event.subscription_id)
                if sub is not None:
                    sub.credit_failed(event.code)
            elif isinstance(event, ev.ConsumerUpdateRequested):
                sub = self._subscribers.get(event.subscription_id)
                if sub is None:
                    self._machine.answer_consumer_update(event.correlation_id)
                else:
                    sub.consumer_update(event)
            elif isinstance(event, ev.CloseRequested):
                # the machine queued the answer: write it before the connection ends; the
                # reader closes the socket once it is out
                with contextlib.suppress(StreamwireError):
                    self._stream.write(self._machine.data_to_send())
                err = ERRORS.from_code(event.code, f"broker closed the connection: {event.reason}")
                self._fail(ConnectionClosed(str(err)), cause=err, abort=False)
            elif isinstance(event, ev.ConnectionClosedByPeer):
                self._fail(ConnectionClosed(f"{self.address} closed the connection"))
            elif isinstance(event, ev.PeerWentSilent):
                self._fail(
                    ConnectionClosed(
                        f"no heartbeat from {self.address} for {event.silent_for:.1f} s"
                    )
                )
            elif isinstance(event, ProtocolFailed):
                self._fail(
                    ConnectionClosed(f"protocol violation: {event.error}"), cause=event.error
                )

    def _lost_callbacks(self) -> list[Callable[[StreamwireError], None]]:
        listeners = [*self._publishers.values(), *self._subscribers.values()]
        return [listener.connection_lost for listener in listeners]

    def _waiter_error(self, exc: StreamwireError) -> Callable[[], StreamwireError]:
        return lambda: ConnectionClosed(str(exc))

    # --- closing -------------------------------------------------------------------------

    async def _goodbye(self, timeout: float) -> None:
        """Send Close and wait for the answer."""
        if not self._machine.is_open:
            return
        corr = self._machine.close()
        future = self._inflight.register(corr)
        await self.flush()
        await self._inflight.wait(corr, future, timeout)
