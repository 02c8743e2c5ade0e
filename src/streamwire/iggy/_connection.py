"""The asyncio driver of one Iggy connection.

It moves bytes and owns two tasks: a reader that feeds the sans-IO machine, and a timer
that wakes the machine at its deadlines (reply timeouts, heartbeat pings). Requests go one at
a time under a lock, as the protocol requires. When the connection ends (eviction, protocol
violation, silence, end of stream, local close) every waiter and listener learns why through
one recorded exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from streamwire.errors import (
    ClosedError,
    ConnectionClosed,
    ConnectTimeout,
    ServerError,
    StreamwireError,
)
from streamwire.iggy.protocol import events as ev
from streamwire.iggy.protocol._wire import RequestPayload
from streamwire.iggy.protocol.machine import IggyConnection, MachineSettings, PendingRequest
from streamwire.iggy.protocol.system import (
    LoginRegister,
    LoginRegisterWithToken,
    LoginReply,
    LogoutUser,
    Ping,
)
from streamwire.transport.base import ByteStream
from streamwire.transport.deadline import Deadline
from streamwire.transport.tcp import open_tcp
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


class Connection:
    """A logged-in connection. Create with :meth:`open`; close with :meth:`close`."""

    def __init__(self, stream: ByteStream, machine: IggyConnection, address: str) -> None:
        self._stream = stream
        self._machine = machine
        self.address = address
        self._loop = asyncio.get_running_loop()
        self._lock = asyncio.Lock()
        self._waiter: tuple[PendingRequest, asyncio.Future[Any]] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._error: StreamwireError | None = None
        self._closing = False
        self.login: LoginReply | None = None
        self.on_lost: list[Callable[[StreamwireError], None]] = []

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
    ) -> Connection:
        """Connect and log in within one ``timeout`` budget.

        Cancellation: the socket is closed; nothing is left running.
        """
        address = f"{host}:{port}"
        deadline = Deadline(timeout, exc_type=ConnectTimeout, what=f"connecting to {address}")
        stream = await open_tcp(host, port, tls=tls, timeout=deadline.remaining())
        return await cls.start(stream, address, credentials, deadline=deadline, settings=settings)

    @classmethod
    async def start(
        cls,
        stream: ByteStream,
        address: str,
        credentials: Credentials,
        *,
        deadline: Deadline | None = None,
        settings: MachineSettings | None = None,
    ) -> Connection:
        """Log in over an already connected stream (used by :meth:`open` and tests)."""
        self = cls(stream, IggyConnection(settings), address)
        self._tasks = [
            asyncio.create_task(self._read_loop(), name=f"streamwire-iggy-reader {address}"),
            asyncio.create_task(self._timer_loop(), name=f"streamwire-iggy-timer {address}"),
        ]
        deadline = deadline or Deadline(None)
        try:
            async with deadline.scope(ConnectTimeout, what=f"logging in to {address}"):
                self.login = await self._call(credentials.login_payload(), None, login=True)
        except BaseException:
            await self._shutdown(ClosedError("login failed"))
            raise
        return self

    # --- state ---------------------------------------------------------------------------

    @property
    def machine(self) -> IggyConnection:
        return self._machine

    @property
    def is_open(self) -> bool:
        return self._error is None and self._machine.is_ready

    @property
    def error(self) -> StreamwireError | None:
        """Why the connection ended, once it has."""
        return self._error

    def check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closing:
            raise ClosedError(f"connection to {self.address} is closing")

    # --- requests ------------------------------------------------------------------------

    async def request(self, payload: RequestPayload[R], *, timeout: float | None = None) -> R:
        """Send one request and return its parsed reply; ``timeout`` overrides the default
        reply timeout. Server errors raise their :class:`IggyServerError` class; transient
        consensus rejections (57/58) are retried with the same request number.

        Cancellation: a request already sent still completes on the wire (its reply is
        consumed and dropped); the connection stays usable.
        """
        result: R = await self._call(payload, timeout)
        return result

    async def _call(
        self, payload: RequestPayload[Any], timeout: float | None, *, login: bool = False
    ) -> Any:
        async with self._lock:
            await self._idle.wait()  # a cancelled caller's request may still be in flight
            self.check()
            now = self._loop.time()
            if login:
                pending = self._machine.login(payload, now)
            else:
                pending = self._machine.send(payload, now, timeout=timeout)
            for attempt in range(_TRANSIENT_RETRIES + 1):
                future: asyncio.Future[Any] = self._loop.create_future()
                self._waiter = (pending, future)
                self._idle.clear()
                await self._flush()
                try:
                    return await future
                except ServerError as exc:
                    if exc.code not in _TRANSIENT_CODES or attempt == _TRANSIENT_RETRIES:
                        raise
                    logger.debug("%s: transient %s, retrying", pending.command.name, exc)
                await asyncio.sleep(0.05 * (attempt + 1))
                await self._idle.wait()
                self.check()
                pending = self._machine.retry(pending, self._loop.time())
            raise AssertionError("unreachable")  # pragma: no cover

    async def ping(self, timeout: float | None = None) -> None:
        await self.request(Ping(), timeout=timeout)

    async def _flush(self) -> None:
        data = self._machine.data_to_send()
        self._wakeup.set()
        if data:
            try:
                await self._stream.send(data)
            except StreamwireError as exc:
                self._fail(exc)
                raise

    # --- background tasks ----------------------------------------------------------------

    async def _read_loop(self) -> None:
        machine, stream = self._machine, self._stream
        try:
            while self._error is None:
                data = await stream.read()
                self._dispatch(machine.receive_data(data, self._loop.time()))
                if not data:
                    return
        except asyncio.CancelledError:
            raise
        except StreamwireError as exc:
            self._fail(exc)
        except Exception as exc:  # a bug: record it so that nobody waits forever
            logger.exception("Iggy reader for %s failed", self.address)
            self._fail(ConnectionClosed(f"reader failed: {exc!r}"), cause=exc)

    async def _timer_loop(self) -> None:
        machine = self._machine
        try:
            while self._error is None:
                deadline = machine.next_deadline()
                delay = None if deadline is None else max(0.0, deadline - self._loop.time())
                self._wakeup.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._wakeup.wait()
                self._dispatch(machine.advance_time(self._loop.time()))
        except asyncio.CancelledError:
            raise

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
                task = asyncio.create_task(self._heartbeat(), name="streamwire-iggy-ping")
                self._tasks.append(task)
                task.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        with contextlib.suppress(ValueError):
            self._tasks.remove(task)

    async def _heartbeat(self) -> None:
        try:
            await self.ping()
        except StreamwireError as exc:
            logger.debug("heartbeat to %s failed: %s", self.address, exc)

    def _resolve(
        self, pending: PendingRequest, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        waiter = self._waiter
        if waiter is None or waiter[0] is not pending:
            logger.debug("dropping the reply to %s: nobody waits", pending.command.name)
        else:
            self._waiter = None
            future = waiter[1]
            if not future.done():
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)
        if self._machine.pending is None:
            self._idle.set()
        self._wakeup.set()  # the next deadline moved (reply deadline → heartbeat)

    def _fail(self, exc: StreamwireError, *, cause: BaseException | None = None) -> None:
        if self._error is not None:
            return
        if cause is not None:
            exc.__cause__ = cause
        self._error = exc
        logger.debug("connection to %s ended: %s", self.address, exc)
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter[1].done():
            waiter[1].set_exception(exc)
        self._idle.set()
        self._wakeup.set()
        self._stream.abort()
        for callback in list(self.on_lost):
            try:
                callback(exc)
            except Exception:  # a listener bug must not stop the others
                logger.exception("connection-lost listener failed")

    # --- closing -------------------------------------------------------------------------

    async def close(self, timeout: float = 5.0) -> None:
        """Log out (best effort, within ``timeout``), then drop the socket. Idempotent.

        Cancellation: the socket is aborted and tasks are cancelled before re-raising.
        """
        if self._closing:
            return
        try:
            if self.is_open:
                with contextlib.suppress(StreamwireError, TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self.request(LogoutUser(), timeout=timeout)
        finally:
            self._closing = True
            await self._shutdown(ClosedError(f"connection to {self.address} was closed"))

    async def _shutdown(self, reason: StreamwireError) -> None:
        self._closing = True
        self._fail(reason)
        self._machine.close()
        tasks, self._tasks = list(self._tasks), []
        current = asyncio.current_task()
        for task in tasks:
            if task is not current:
                task.cancel()
        for task in tasks:
            if task is not current:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._stream.aclose(timeout=1.0)
