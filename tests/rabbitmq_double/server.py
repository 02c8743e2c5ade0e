"""A loopback asyncio server speaking the RabbitMQ Streams protocol, for driver tests that
need no broker. It reuses streamwire's sans-IO frames (``streamwire.rabbitmq.protocol``)
both ways: requests are decoded with ``decode_frame``, answers built with ``encode_frame``.

Faults for client tests: ``refuse`` (answer a command key with an error code),
``reject`` (publishing id → code, answered with PublishError), ``hold_confirms`` (store but
confirm later, :meth:`RabbitMQDouble.release_confirms`), and per session ``hang_up``,
``close_with``, ``send_raw`` and ``silent``.

Not modelled: several nodes (every stream's leader is this server), single active consumer
(ConsumerUpdate), Bloom-filtered delivery, ResolveOffsetSpec, retention.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from types import TracebackType
from typing import Self, TypeVar

from streamwire.errors import StreamwireError
from streamwire.rabbitmq.protocol import frames as f
from streamwire.rabbitmq.protocol.constants import ResponseCode
from tests.rabbitmq_double.session import Session
from tests.rabbitmq_double.state import BrokerState

__all__ = ("RabbitMQDouble",)

_F = TypeVar("_F", bound=f.Frame)


class RabbitMQDouble:
    """``async with RabbitMQDouble() as broker:`` then connect to ``broker.url``."""

    def __init__(
        self,
        *,
        username: str = "guest",
        password: str = "guest",  # noqa: S107 - the default user of a test broker
        vhost: str = "/",
        heartbeat: int = 60,
        frame_max: int = 1_048_576,
        version: str = "4.0.5",
    ) -> None:
        self.username, self.password, self.vhost = username, password, vhost
        self.anonymous = False
        self.heartbeat = heartbeat
        self.frame_max = frame_max
        self.version = version
        self.host = "127.0.0.1"
        self.port = 0
        self.state = BrokerState()
        self.sessions: list[Session] = []
        self.received: list[tuple[int, f.Frame]] = []
        """(session number, frame) for every frame received, in order."""
        self.malformed: list[bytes] = []
        self.bugs: list[Exception] = []
        """Exceptions raised inside the double; :meth:`stop` re-raises the first."""
        self.refuse: dict[int, int] = {}
        """Command key → response code every such request gets instead of its answer."""
        self.reject: dict[int, int] = {}
        """Publishing id → response code: answered with PublishError, not stored."""
        self.hold_confirms = False
        self.held: list[tuple[Session, f.PublishConfirm]] = []
        self.timestamp: Callable[[], int] = lambda: int(time.time() * 1000)
        """Milliseconds written into each new chunk."""
        self.changed = asyncio.Event()
        """Set whenever frames were handled."""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"rabbitmq-stream://{self.username}:{self.password}@{self.host}:{self.port}/"

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> Self:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        for session in self.sessions:
            session.hang_up()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self.bugs:
            raise AssertionError("the RabbitMQ double failed") from self.bugs[0]

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- the connection loop -------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        session = Session(self, len(self.sessions), writer)
        self.sessions.append(session)
        beat = asyncio.create_task(self._heartbeats(session))
        try:
            while not session.closed and (data := await reader.read(1 << 16)):
                session.frames.feed(data)
                self._handle_frames(session)
                self.changed.set()
        except (ConnectionError, StreamwireError):
            pass
        except Exception as exc:  # a bug of the double: fail the test that met it
            self.bugs.append(exc)
            raise
        finally:
            session.closed = True
            beat.cancel()
            writer.close()
            self._tasks.discard(task)

    def _handle_frames(self, session: Session) -> None:
        while not session.closed and (body := session.frames.next_frame()) is not None:
            try:
                frame = f.decode_frame(body)
            except StreamwireError:
                self.malformed.append(body)
                session.close_with(ResponseCode.UNKNOWN_FRAME, "malformed frame")
                return
            self.received.append((session.number, frame))
            session.handle(frame)

    async def _heartbeats(self, session: Session) -> None:
        while not session.closed:
            await asyncio.sleep(session.heartbeat or 1.0)
            if session.heartbeat and session.opened:
                session.send(f.Heartbeat())

    # --- publishing ----------------------------------------------------------------------

    def published(self, session: Session, frame: f.Publish) -> None:
        declared = session.publishers.get(frame.publisher_id)
        ids = [e.publishing_id for e in frame.entries]
        if declared is None:
            errors = tuple((pid, int(ResponseCode.PUBLISHER_DOES_NOT_EXIST)) for pid in ids)
            session.send(f.PublishError(frame.publisher_id, errors))
            return
        reference, stream = declared
        rejected = tuple((pid, self.reject[pid]) for pid in ids if pid in self.reject)
        if rejected:
            session.send(f.PublishError(frame.publisher_id, rejected))
        kept = [
            (e.publishing_id, e.data) for e in frame.entries if e.publishing_id not in self.reject
        ]
        if not kept or stream not in self.state.streams:
            return
        chunk = self.state.publish(stream, reference, kept, self.timestamp())
        confirm = f.PublishConfirm(frame.publisher_id, tuple(pid for pid, _ in kept))
        if self.hold_confirms:
            self.held.append((session, confirm))
        else:
            session.send(confirm)
        if chunk is not None:
            for other in self.sessions:
                other.pump()

    def release_confirms(self) -> None:
        held, self.held = self.held, []
        for session, confirm in held:
            session.send(confirm)

    def append(self, stream: str, *entries: bytes) -> None:
        """Write one chunk of complete osiris entries to ``stream`` and deliver it."""
        self.state.streams[stream].append(entries, self.timestamp())
        for session in self.sessions:
            session.pump()

    def stream_gone(self, stream: str) -> None:
        """Tell every session publishing to or consuming ``stream`` that it is gone."""
        for session in self.sessions:
            users = [sid for sid, sub in session.subscriptions.items() if sub.stream == stream]
            users += [pid for pid, (_, s) in session.publishers.items() if s == stream]
            if users:
                session.send(f.MetadataUpdate(ResponseCode.STREAM_NOT_AVAILABLE, stream))

    # --- looking ---------------------------------------------------------------------------

    def frames(self, cls: type[_F]) -> list[_F]:
        """Every received frame of type ``cls``, in order."""
        return [frame for _, frame in self.received if type(frame) is cls]

    def session_publishing(self, stream: str) -> Session:
        return next(
            s for s in self.sessions if any(st == stream for _, st in s.publishers.values())
        )

    def session_consuming(self, stream: str) -> Session:
        return next(
            s for s in self.sessions if any(v.stream == stream for v in s.subscriptions.values())
        )

    async def until(self, predicate: Callable[[], object], timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` is true; TimeoutError after ``timeout``."""
        async with asyncio.timeout(timeout):
            while not predicate():
                self.changed.clear()
                with contextlib.suppress(TimeoutError):  # the client side may change too
                    async with asyncio.timeout(0.01):
                        await self.changed.wait()
