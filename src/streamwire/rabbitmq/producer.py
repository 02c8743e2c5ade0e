"""RabbitMQ Streams producer: bounded buffer, batched Publish frames, confirm futures,
deduplication with a named producer, and re-sending after a reconnect.

Flow: ``send()`` encodes the message, gives it the next publishing id and puts it in the
buffer (waiting while the buffer is full); a sender task packs buffered messages into Publish
frames no larger than the connection's frame_max, as long as fewer than ``max_in_flight``
messages await confirmation. Confirms and errors resolve the per-message futures.

With ``name`` the broker deduplicates by publishing id: on start the producer asks the broker
for the last id stored under that name and continues after it, so re-sending after a crash
or a reconnect never stores a message twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from streamwire.codec.amqp import encode_data_body
from streamwire.codec.headers import HeaderInput
from streamwire.codec.message import Confirmation, Message
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    FlushTimeout,
    LocalProtocolError,
    ProducerBufferFull,
    StreamwireError,
)
from streamwire.rabbitmq._amqp_map import encode_message
from streamwire.rabbitmq.protocol.connection import SimpleResponse
from streamwire.rabbitmq.protocol.errors import ERRORS, StreamDoesNotExist
from streamwire.rabbitmq.protocol.publishing import (
    DeclarePublisherRequest,
    DeletePublisherRequest,
    QueryPublisherSequenceRequest,
    QueryPublisherSequenceResponse,
    encode_publish,
    publish_header_size,
    validate_reference,
)

if TYPE_CHECKING:
    from streamwire.rabbitmq._connection import Connection
    from streamwire.rabbitmq.client import Client

__all__ = ("Producer", "ProducerOptions")

logger = logging.getLogger(__name__)

_ENTRY_OVERHEAD = 12  # publishing id + entry size
_ENTRY_OVERHEAD_V2 = 14  # plus a null filter value; real filter values add their bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerOptions:
    max_buffer_messages: int = 10_000
    """Messages accepted by ``send`` but not yet written to the socket."""
    max_buffer_bytes: int = 32 * 1024 * 1024
    max_in_flight: int = 10_000
    """Messages written but not yet confirmed (the broker blocks at 50 000 per connection)."""
    max_block: float | None = 30.0
    """How long ``send`` waits for room in a full buffer before raising ProducerBufferFull."""
    confirm_timeout: float | None = 30.0
    """``send_and_wait`` and ``flush`` give up after this long by default."""
    amqp: bool = True
    """Wrap values in AMQP 1.0 messages (what every RabbitMQ client expects); False sends the
    raw bytes as they are."""
    filter_value: Callable[[Message], str | None] | None = None
    """Extract a filter value per message (RabbitMQ 3.13+ filtering: Publish v2)."""

    def __post_init__(self) -> None:
        for name in ("max_buffer_messages", "max_buffer_bytes", "max_in_flight"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be >= 1")


class Producer:
    """Publishes to one stream. Use ``async with client.producer(stream) as p``."""

    def __init__(
        self, client: Client, stream: str, *, name: str | None = None, options: ProducerOptions
    ) -> None:
        if name is not None:
            if not name:
                raise ConfigurationError("a producer name must not be empty")
            validate_reference(name)
        self._client = client
        self.stream = stream
        self.name = name
        self.options = options
        self._loop = asyncio.get_running_loop()
        self._conn: Connection | None = None
        self._publisher_id = -1
        self._next_id = 1
        self._buffer: deque[tuple[int, bytes, str | None]] = deque()
        self._buffer_bytes = 0
        # publishing id -> (future, encoded message, filter value); buffered and in flight
        self._waiting: dict[int, tuple[asyncio.Future[Confirmation], bytes, str | None]] = {}
        self._in_flight = 0
        self._room = asyncio.Event()
        self._work = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._sender: asyncio.Task[None] | None = None
        self._error: StreamwireError | None = None
        self._first_failure: BaseException | None = None
        self._closed = False
        self._recovering: asyncio.Task[None] | None = None

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self, timeout: float | None = 30.0) -> Self:
        """Declare the publisher (and read the dedup sequence if named).

        Cancellation: nothing was declared, or the declaration is removed with the
        connection; the producer is unusable.
        """
        async with asyncio.timeout(timeout):
            await self._declare()
        self._sender = asyncio.create_task(
            self._send_loop(), name=f"streamwire-producer {self.stream}"
        )
        return self

    def __await__(self) -> Any:
        return self.start().__await__()

    async def __aenter__(self) -> Self:
        if self._sender is None:
            await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close(flush=exc_type is None)

    async def _declare(self) -> None:
        conn = await self._client._leader_connection(self.stream)
        pid = conn.free_publisher_id()
        conn.add_publisher(pid, self)
        try:
            await conn.request(
                lambda corr: DeclarePublisherRequest(corr, pid, self.name or "", self.stream),
                SimpleResponse,
            )
            if self.name:
                seq = await conn.request(
                    lambda corr: QueryPublisherSequenceRequest(corr, self.name or "", self.stream),
                    QueryPublisherSequenceResponse,
                )
                self._next_id = max(self._next_id, seq.sequence + 1)
        except BaseException:
            conn.remove_publisher(pid)
            raise
        self._conn = conn
        self._publisher_id = pid

    @property
    def next_publishing_id(self) -> int:
        """The id the next message gets (for a named producer: last stored + 1 at start)."""
        return self._next_id

    @property
    def last_publishing_id(self) -> int:
        """The last id given out (0 if none)."""
        return self._next_id - 1

    @property
    def pending(self) -> int:
        """Messages sent but not yet confirmed or failed."""
        return len(self._waiting)

    # --- sending -------------------------------------------------------------------------

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ClosedError(f"producer for {self.stream!r} is closed")
        if self._sender is None:
            raise ClosedError("producer not started: use 'async with' or 'await'")

    def _encode(
        self, value: bytes | Message, key: bytes | None, headers: Mapping[str, HeaderInput] | None
    ) -> tuple[bytes, str | None]:
        if isinstance(value, Message):
            msg = value
        elif key is None and not headers:
            if not isinstance(value, bytes | bytearray | memoryview):
                raise ConfigurationError(f"message value must be bytes, got {type(value).__name__}")
            fv = None
            if self.options.filter_value is not None:
                fv = self.options.filter_value(Message(value))
            return (encode_message(bytes(value)) if self.options.amqp else bytes(value)), fv
        else:
            msg = Message(value, key=key, headers=headers)
        data = encode_message(msg) if self.options.amqp else msg.value
        fv = self.options.filter_value(msg) if self.options.filter_value is not None else None
        return data, fv

    async def send(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        publishing_id: int | None = None,
        timeout: float | None = None,
    ) -> asyncio.Future[Confirmation]:
        """Accept one message; returns the future of its confirmation.

        ``publishing_id`` overrides the next id (for exactly-once resumption: ids must keep
        increasing). Waits for room while the buffer is full, up to ``timeout`` (default
        ``max_block``), then raises :class:`ProducerBufferFull`.

        Cancellation: a message whose ``send`` is cancelled was not accepted. Cancelling the
        returned future does not stop its delivery.
        """
        self._check()
        data, fv = self._encode(value, key, headers)
        await self._wait_for_room(len(data), timeout)
        return self._accept(data, fv, publishing_id)

    def _accept(
        self, data: bytes, fv: str | None, publishing_id: int | None
    ) -> asyncio.Future[Confirmation]:
        if publishing_id is None:
            publishing_id = self._next_id
        elif publishing_id in self._waiting:
            raise LocalProtocolError(f"publishing id {publishing_id} is already pending")
        if not 0 <= publishing_id < 1 << 64:
            raise ConfigurationError(f"publishing id {publishing_id} does not fit in uint64")
        self._next_id = max(self._next_id, publishing_id + 1)
        future: asyncio.Future[Confirmation] = self._loop.create_future()
        entry = (future, data, fv)
        self._waiting[publishing_id] = entry
        self._buffer.append((publishing_id, data, fv))
        self._buffer_bytes += len(data)
        self._idle.clear()
        self._work.set()
        return future

    async def _wait_for_room(self, size: int, timeout: float | None) -> None:
        opts = self.options
        if (
            len(self._buffer) < opts.max_buffer_messages
            and self._buffer_bytes + size <= opts.max_buffer_bytes
        ):
            return
        if size > opts.max_buffer_bytes:
            raise ConfigurationError(f"a {size}-byte message exceeds max_buffer_bytes")
        wait = opts.max_block if timeout is None else timeout
        try:
            async with asyncio.timeout(wait):
                while (
                    len(self._buffer) >= opts.max_buffer_messages
                    or self._buffer_bytes + size > opts.max_buffer_bytes
                ):
                    self._room.clear()
                    await self._room.wait()
                    self._check()
        except TimeoutError:
            raise ProducerBufferFull(
                f"producer buffer for {self.stream!r} stayed full for {wait} s"
            ) from None

    async def send_and_wait(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
        publishing_id: int | None = None,
        timeout: float | None = None,
    ) -> Confirmation:
        """Send one message and wait for its confirmation (``timeout`` defaults to
        ``confirm_timeout``).

        Cancellation: the message may still be stored; only the wait stops.
        """
        future = await self.send(value, key=key, headers=headers, publishing_id=publishing_id)
        wait = self.options.confirm_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(wait):
                return await asyncio.shield(future)
        except TimeoutError:
            raise FlushTimeout(f"no confirmation for publishing id within {wait} s") from None

    async def send_batch(
        self, values: Iterable[bytes | Message], *, timeout: float | None = None
    ) -> list[asyncio.Future[Confirmation]]:
        """Accept several messages in order; returns their confirmation futures.

        Waits for room like :meth:`send` whenever the buffer is full.

        Cancellation: the messages accepted before the cancellation stay accepted.
        """
        self._check()
        opts = self.options
        fast = opts.amqp and opts.filter_value is None
        create = self._loop.create_future
        waiting, buffer = self._waiting, self._buffer
        max_messages, max_bytes = opts.max_buffer_messages, opts.max_buffer_bytes
        futures: list[asyncio.Future[Confirmation]] = []
        append = futures.append
        pid = self._next_id
        for value in values:
            if fast and type(value) is bytes:
                data, fv = encode_data_body(value), None
            else:
                data, fv = self._encode(value, None, None)
            n = len(data)
            if len(buffer) >= max_messages or self._buffer_bytes + n > max_bytes:
                self._next_id = pid
                self._kick()
                await self._wait_for_room(n, timeout)
                pid = self._next_id  # other tasks may have sent meanwhile
            future = create()
            waiting[pid] = (future, data, fv)
            buffer.append((pid, data, fv))
            self._buffer_bytes += n
            append(future)
            pid += 1
        self._next_id = pid
        self._kick()
        return futures

    def _kick(self) -> None:
        if self._buffer:
            self._idle.clear()
            self._work.set()

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until nothing is pending: every accepted message confirmed or failed. Raises
        the first failure since the previous flush, or :class:`FlushTimeout`.

        Cancellation: only the wait stops.
        """
        if self._error is not None:
            raise self._error
        wait = self.options.confirm_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(wait):
                await self._idle.wait()
        except TimeoutError:
            raise FlushTimeout(f"{self.pending} messages unconfirmed after {wait} s") from None
        if self._error is not None:
            raise self._error
        failure, self._first_failure = self._first_failure, None
        if failure is not None:
            raise failure

    # --- the sender task -----------------------------------------------------------------

    async def _send_loop(self) -> None:
        try:
            while True:
                await self._work.wait()
                conn = self._conn
                if conn is None or not self._buffer or self._recovering is not None:
                    self._work.clear()
                    if not self._buffer and not self._waiting:
                        self._idle.set()
                    continue
                if self._in_flight >= self.options.max_in_flight:
                    self._work.clear()
                    continue
                frame = self._next_frame(conn.frame_max)
                self._room.set()
                try:
                    await conn.send_encoded(frame)
                except StreamwireError as exc:
                    logger.debug("publish on %s failed: %s", self.stream, exc)
                    self._work.clear()  # the connection listener takes it from here
        except asyncio.CancelledError:
            raise

    def _next_frame(self, frame_max: int) -> bytes:
        buffer = self._buffer
        limit = (frame_max or 1 << 30) - publish_header_size()
        room = self.options.max_in_flight - self._in_flight
        v2 = self.options.filter_value is not None
        overhead = _ENTRY_OVERHEAD_V2 if v2 else _ENTRY_OVERHEAD
        batch: list[tuple[int, bytes, str | None]] = []
        size = data_bytes = 0
        taken = 0
        while buffer and taken < room:
            entry = buffer[0]
            data = entry[1]
            need = len(data) + overhead + (len(entry[2].encode()) if entry[2] else 0)
            if size + need > limit:
                if batch:
                    break
                buffer.popleft()
                self._buffer_bytes -= len(data)
                self._fail_one(
                    entry[0],
                    LocalProtocolError(
                        f"a {len(data)}-byte message does not fit in frame_max {frame_max}"
                    ),
                )
                continue
            batch.append(buffer.popleft())
            size += need
            data_bytes += len(data)
            taken += 1
        self._buffer_bytes -= data_bytes
        self._in_flight += taken
        if not buffer:
            self._work.clear()
        filters = [e[2] for e in batch] if v2 else None
        return encode_publish(self._publisher_id, batch, filter_values=filters)

    # --- connection listener -------------------------------------------------------------

    def confirmed(self, publishing_ids: tuple[int, ...]) -> None:
        pop = self._waiting.pop
        new = tuple.__new__
        stream = self.stream
        done = 0
        for pid in publishing_ids:
            entry = pop(pid, None)
            if entry is not None:
                done += 1
                future = entry[0]
                if not future.done():
                    future.set_result(new(Confirmation, (pid, None, stream, None)))
        self._window_moved(done)

    def errored(self, errors: tuple[tuple[int, int], ...]) -> None:
        done = 0
        for pid, code in errors:
            if self._fail_one(
                pid, ERRORS.from_code(code, f"publishing id {pid} on {self.stream!r}")
            ):
                done += 1
        self._window_moved(done)

    def _fail_one(self, pid: int, exc: BaseException) -> bool:
        entry = self._waiting.pop(pid, None)
        if entry is None:
            return False
        if self._first_failure is None:
            self._first_failure = exc
        if not entry[0].done():
            entry[0].set_exception(exc)
        return True

    def _window_moved(self, done: int) -> None:
        self._in_flight = max(0, self._in_flight - done)
        if self._buffer:
            self._work.set()
        elif not self._waiting:
            self._idle.set()

    def metadata_changed(self, stream: str, code: int) -> None:
        if stream == self.stream:
            self._lost(ERRORS.from_code(code, f"stream {stream!r} changed (metadata update)"))

    def connection_lost(self, exc: StreamwireError) -> None:
        self._lost(exc)

    def _lost(self, exc: StreamwireError) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.remove_publisher(self._publisher_id)
        if self._closed or self._error is not None or self._recovering is not None:
            return
        policy = self._client.reconnect
        if policy is None or isinstance(exc, StreamDoesNotExist | ClosedError):
            self._fail_all(exc)
            return
        self._recovering = asyncio.create_task(
            self._recover(exc), name=f"streamwire-producer-recover {self.stream}"
        )

    async def _recover(self, cause: StreamwireError) -> None:
        """Re-declare and re-send every unconfirmed message with its original id."""
        try:
            await self._client.retry(self._declare, cause, what=f"producer on {self.stream!r}")
        except StreamwireError as exc:
            self._recovering = None
            self._fail_all(exc)
            return
        except asyncio.CancelledError:
            self._recovering = None
            raise
        self._buffer = deque(sorted((pid, d, fv) for pid, (_, d, fv) in self._waiting.items()))
        self._buffer_bytes = sum(len(d) for _, d, _ in self._buffer)
        self._in_flight = 0
        self._recovering = None
        logger.info(
            "producer on %s recovered; re-sending %d messages", self.stream, len(self._buffer)
        )
        self._work.set()

    def _fail_all(self, exc: StreamwireError) -> None:
        self._error = exc
        waiting, self._waiting = self._waiting, {}
        self._buffer.clear()
        self._buffer_bytes = 0
        for future, _, _ in waiting.values():
            if not future.done():
                future.set_exception(exc)
        self._room.set()
        self._idle.set()

    # --- closing -------------------------------------------------------------------------

    async def close(self, *, flush: bool = True, timeout: float | None = None) -> None:
        """Flush (unless ``flush=False``), delete the publisher and stop. Idempotent.

        Messages still unconfirmed afterwards fail with :class:`ClosedError`.

        Cancellation: the producer is closed without waiting further.
        """
        if self._closed:
            return
        try:
            if flush and self._error is None:
                with contextlib.suppress(StreamwireError):
                    await self.flush(timeout)
        finally:
            self._closed = True
            for task in (self._sender, self._recovering):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            conn = self._conn
            if conn is not None and conn.is_open:
                with contextlib.suppress(StreamwireError, TimeoutError):
                    await conn.request(
                        lambda corr: DeletePublisherRequest(corr, self._publisher_id),
                        SimpleResponse,
                        timeout=5.0,
                    )
                conn.remove_publisher(self._publisher_id)
            self._conn = None
            if self._waiting:
                self._fail_all(
                    ClosedError(f"producer for {self.stream!r} closed before confirmation")
                )
