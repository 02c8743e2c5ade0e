"""The asyncio driver of one Iggy connection.

The reader (feeding the sans-IO machine) and the timer (waking it at its deadlines: reply
timeouts, heartbeat pings), the table of requests awaiting replies, the end and closing are
the shared driver core (:mod:`streamwire.transport.driver`); this module adds the wire.
Requests are
written in the order they are made, under a lock; replies come back in that order (the
server handles a connection's requests one at a time) and resolve one future each. Up to
``MachineSettings.max_in_flight`` reads and SendMessages may await their replies at once
(:meth:`Connection.submit`); login, logout, metadata and consumer-offset writes go alone and
keep the lock until answered. When the connection ends (eviction, protocol violation,
silence, end of stream, local close) every waiter and listener learns why through one
recorded exception.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, cast

from streamwire.codec.framing import IGGY_HEADER
from streamwire.errors import (
    ClosedError,
    ConfigurationError,
    ConnectionClosed,
    ConnectTimeout,
    ServerError,
    StreamwireError,
)
from streamwire.iggy.protocol import events as ev
from streamwire.iggy.protocol._wire import RequestPayload
from streamwire.iggy.protocol.constants import COMMANDS, Operation
from streamwire.iggy.protocol.errors import IncompatibleProtocolVersion, incompatible_server
from streamwire.iggy.protocol.machine import (
    IggyConnection,
    MachineSettings,
    PendingRequest,
    ReplyStats,
)
from streamwire.iggy.protocol.system import (
    LoginRegister,
    LoginRegisterWithToken,
    LoginReply,
    LogoutUser,
    Ping,
)
from streamwire.transport.base import ByteStream
from streamwire.transport.deadline import Deadline
from streamwire.transport.driver import Driver
from streamwire.transport.peers import handshake_failure
from streamwire.transport.tcp import DEFAULT_KEEPALIVE, TcpKeepalive, open_tcp
from streamwire.transport.tls import TLSConfig

__all__ = ("Connection", "Credentials")

logger = logging.getLogger(__name__)

R = TypeVar("R")

_TRANSIENT_CODES: Final = (57, 58)
_TRANSIENT_RETRIES: Final = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Credentials:
    """Username and password, or a personal access token. Secrets never appear in repr."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)

    def login_payload(self) -> LoginRegister | LoginRegisterWithToken:
        if self.token is not None:
            return LoginRegisterWithToken(token=self.token)
        return LoginRegister(username=self.username or "", password=self.password or "")


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _operation(payload: RequestPayload[Any]) -> Operation:
    operation = COMMANDS[payload.command].operation
    if operation is None:
        raise ConfigurationError(f"{payload.command.name} is not a request")
    return operation


class Connection(Driver[IggyConnection, ev.Event, PendingRequest]):
    """A logged-in connection. Create with :meth:`open`; close with :meth:`close`."""

    wire = "iggy"

    def __init__(self, stream: ByteStream, machine: IggyConnection, address: str) -> None:
        super().__init__(stream, machine, address)
        self._lock = asyncio.Lock()  # writing order; held through a request that goes alone
        self._progress = asyncio.Event()  # a reply arrived or the connection ended
        self.login: LoginReply | None = None

    # --- opening -------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        credentials: Credentials,
        *,
        tls: TLSConfig | None = None,
        timeout: float | None = 30.0,
        settings: MachineSettings | None = None,
        stats: ReplyStats | None = None,
        keepalive: TcpKeepalive | None = DEFAULT_KEEPALIVE,
    ) -> Connection:
        """Connect and log in within one ``timeout`` budget. ``stats`` (shared by a
        client's connections) counts the replies that surprised the machine.

        Cancellation: the socket is closed; nothing is left running.
        """
        address = f"{host}:{port}"
        deadline = Deadline(timeout, exc_type=ConnectTimeout, what=f"connecting to {address}")
        stream = await open_tcp(
            host,
            port,
            tls=tls,
            timeout=deadline.remaining(),
            frames=IGGY_HEADER,  # a poll reply is received into one buffer of its size
            max_frame_size=(settings or MachineSettings()).max_frame_size,
            keepalive=keepalive,
        )
        return await cls.start(
            stream, address, credentials, deadline=deadline, settings=settings, stats=stats
        )

    @classmethod
    async def start(
        cls,
        stream: ByteStream,
        address: str,
        credentials: Credentials,
        *,
        deadline: Deadline | None = None,
        settings: MachineSettings | None = None,
        stats: ReplyStats | None = None,
    ) -> Connection:
        """Log in over an already connected stream (used by :meth:`open` and tests)."""
        self = cls(stream, IggyConnection(settings, stats=stats), address)
        self._start_tasks()
        deadline = deadline or Deadline(None)
        payload = credentials.login_payload()
        try:
            async with deadline.scope(ConnectTimeout, what=f"logging in to {address}"):
                self.login = await self._call_alone(payload, None, login=True)
        except IncompatibleProtocolVersion as exc:
            await self._shutdown(ClosedError("login failed"))
            raise incompatible_server(address, payload.protocol_version, exc) from exc
        except StreamwireError as exc:
            await self._shutdown(ClosedError("login failed"))
            first = getattr(stream, "first_bytes", b"")  # a TcpStream's; not every stream's
            better = handshake_failure(address, "Iggy", exc, first)
            if better is not None:
                raise better from exc
            raise
        except BaseException:
            await self._shutdown(ClosedError("login failed"))
            raise
        return self

    # --- state ---------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._error is None and self._machine.is_ready

    # --- requests ------------------------------------------------------------------------

    async def request(self, payload: RequestPayload[R], *, timeout: float | None = None) -> R:
        """Send one request and return its parsed reply; ``timeout`` overrides the default
        reply timeout. Server errors raise their :class:`IggyServerError` class; transient
        consensus rejections (57/58) are retried with the same request number.

        Cancellation: a request already sent still completes on the wire (its reply is
        consumed and dropped); the connection stays usable.
        """
        operation = _operation(payload)
        if operation.pipelinable:
            result: R = await (await self.submit(payload, timeout=timeout))
            return result
        return cast(R, await self._call_alone(payload, timeout))

    async def submit(
        self, payload: RequestPayload[R], *, timeout: float | None = None
    ) -> asyncio.Future[R]:
        """Send a read, Ping or SendMessages as soon as the connection has room for it (at
        most ``max_in_flight`` awaiting replies) and return a future of its reply without
        waiting for it. Requests are written in the order of the calls, and their replies
        resolve in that order. A transient rejection (57/58) is retried only if nothing was
        sent after the request; otherwise the future fails with it.

        Cancellation: before the request is written nothing is sent; cancelling the
        returned future drops the reply when it comes.
        """
        operation = _operation(payload)
        if not operation.pipelinable:
            raise ConfigurationError(f"{payload.command.name} cannot be pipelined: use request()")
        async with self._lock:
            await self._room(operation)
            pending = self._machine.send(payload, self._loop.time(), timeout=timeout)
            future = self._register(pending)
            await self._flush()
        return self._relay(pending, future)

    def _relay(self, pending: PendingRequest, future: asyncio.Future[Any]) -> asyncio.Future[Any]:
        """The future :meth:`submit` returns: the reply's outcome, passed on by a callback
        (no task per request); only a transient rejection starts a task, the retry of
        :meth:`_outcome`. Cancelling it cancels the wait for the reply (or the retry)."""
        out: asyncio.Future[Any] = self._loop.create_future()

        def passed(done: asyncio.Future[Any]) -> None:
            if out.done():
                return
            if done.cancelled():
                out.cancel()
            elif (exc := done.exception()) is not None:
                out.set_exception(exc)
            else:
                out.set_result(done.result())

        def replied(done: asyncio.Future[Any]) -> None:
            exc = None if done.cancelled() else done.exception()
            if out.done() or not isinstance(exc, ServerError) or exc.code not in _TRANSIENT_CODES:
                passed(done)
                return
            retry = asyncio.ensure_future(self._outcome(pending, done, locked=False))
            retry.add_done_callback(passed)
            out.add_done_callback(lambda o: retry.cancel() if o.cancelled() else None)

        future.add_done_callback(replied)
        out.add_done_callback(lambda o: future.cancel() if o.cancelled() else None)
        return out

    async def _call_alone(
        self, payload: RequestPayload[Any], timeout: float | None, *, login: bool = False
    ) -> Any:
        async with self._lock:
            await self._room(None)  # a cancelled caller's request may still be in flight
            now = self._loop.time()
            if login:
                pending = self._machine.login(payload, now)
            else:
                pending = self._machine.send(payload, now, timeout=timeout)
            future = self._register(pending)
            await self._flush()
            return await self._outcome(pending, future, locked=True)

    async def _room(self, operation: Operation | None) -> None:
        """Wait, holding the lock, until the machine takes a request of ``operation`` (None:
        until nothing is in flight)."""
        machine = self._machine
        while True:
            self.check()
            if operation is None:
                if not machine.in_flight:
                    return
            elif machine.can_send(operation):
                return
            self._progress.clear()
            await self._progress.wait()

    def _register(self, pending: PendingRequest) -> asyncio.Future[Any]:
        # the reply may come after its caller went away (cancelled): never warn about it
        return self._inflight.register(pending, on_done=_consume)

    async def _outcome(
        self, pending: PendingRequest, future: asyncio.Future[Any], *, locked: bool
    ) -> Any:
        """The reply's result, retrying transient rejections with the same request number
        (``locked``: the caller holds the lock, so nothing can have been sent after it)."""
        for attempt in range(_TRANSIENT_RETRIES + 1):
            try:
                return await future
            except ServerError as exc:
                if exc.code not in _TRANSIENT_CODES or attempt == _TRANSIENT_RETRIES:
                    raise
                logger.debug("%s: transient %s, retrying", pending.command.name, exc)
                if locked:
                    pending, future = await self._resend(pending, attempt)
                    continue
                async with self._lock:
                    if self._machine.queued_after(pending):
                        raise  # re-sending it would put it behind a later request
                    pending, future = await self._resend(pending, attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _resend(
        self, pending: PendingRequest, attempt: int
    ) -> tuple[PendingRequest, asyncio.Future[Any]]:
        await asyncio.sleep(0.05 * (attempt + 1))
        await self._room(None)
        pending = self._machine.retry(pending, self._loop.time())
        future = self._register(pending)
        await self._flush()
        return pending, future

    async def ping(self, timeout: float | None = None) -> None:
        await self.request(Ping(), timeout=timeout)

    async def _flush(self) -> None:
        self._deadline_moved()  # a reply deadline may come first
        await self.flush()

    # --- events --------------------------------------------------------------------------

    def _dispatch(self, events: list[ev.Event]) -> None:
        for event in events:
            if isinstance(event, ev.ReplyReceived):
                self._resolve(event.request, result=event.result)
            elif isinstance(event, ev.RequestFailed):
                self._resolve(event.request, error=event.error)
            elif isinstance(event, ev.Evicted | ev.ProtocolFailed):
                self._fail(event.error)
            elif isinstance(event, ev.ReplyTimedOut):
                self._fail(self._machine.error or ConnectionClosed("reply timed out"))
            elif isinstance(event, ev.ConnectionClosedByPeer):
                self._fail(ConnectionClosed(f"{self.address} closed the connection"))
            elif isinstance(event, ev.HeartbeatDue) and not self._lock.locked():
                self._spawn(self._heartbeat(), name="streamwire-iggy-ping")

    async def _heartbeat(self) -> None:
        try:
            await self.ping()
        except StreamwireError as exc:
            logger.debug("heartbeat to %s failed: %s", self.address, exc)

    def _resolve(
        self, pending: PendingRequest, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        if error is not None:
            self._inflight.fail(pending, error)
        else:
            self._inflight.resolve(pending, result)
        self._progress.set()
        self._deadline_moved()  # the next deadline moved (reply deadline → heartbeat)

    def _ended(self) -> None:
        self._progress.set()

    # --- closing -------------------------------------------------------------------------

    async def _goodbye(self, timeout: float) -> None:
        """Log out."""
        if self.is_open:
            await self.request(LogoutUser(), timeout=timeout)

    async def _shutdown(self, reason: StreamwireError) -> None:
        self._fail(reason)
        self._machine.close()
        await super()._shutdown(reason)

    def abort(self) -> None:
        super().abort()
        self._machine.close()
