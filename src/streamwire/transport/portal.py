"""A synchronous façade over a background event loop, for callers without one.

Spark executors and scripts call the asyncio SDK through it::

    with SyncBridge() as bridge:
        client = bridge.call(connect, "rabbitmq-stream://broker")
        bridge.call(client.send, b"payload")
        bridge.call(client.close)

Every object created through one bridge lives on its loop; use it only through that same
bridge. Built on ``anyio.from_thread.start_blocking_portal`` with the asyncio backend.
"""

from __future__ import annotations

import builtins
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TypeVar, TypeVarTuple

from anyio.from_thread import BlockingPortal, start_blocking_portal

from streamwire.errors import ClientStateError, ClosedError, StreamwireError, TimeoutError

__all__ = ("SyncBridge",)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class SyncBridge:
    """Runs coroutines on a private event loop thread and blocks for their results.

    The thread starts on :meth:`start`, on ``with``, or lazily on the first call. It is
    thread-safe: several threads may call concurrently. :meth:`close` stops the loop,
    cancelling calls still running (they raise :class:`~streamwire.errors.ClosedError`);
    afterwards every call raises :class:`~streamwire.errors.ClosedError`, a
    :class:`~streamwire.errors.ClientStateError`.
    """

    def __init__(self, *, name: str = "streamwire-bridge") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self._portal: BlockingPortal | None = None
        self._loop_thread: int | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self._portal else "idle"
        return f"<SyncBridge {self.name} {state}>"

    def __enter__(self) -> SyncBridge:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def start(self) -> SyncBridge:
        """Start the loop thread if not running yet; returns ``self``."""
        self._get_portal()
        return self

    def _get_portal(self) -> BlockingPortal:
        with self._lock:
            if self._closed:
                raise ClosedError(f"the SyncBridge {self.name!r} is closed")
            if self._portal is None:
                stack = contextlib.ExitStack()
                portal = stack.enter_context(
                    start_blocking_portal(backend="asyncio", name=self.name)
                )
                self._loop_thread = portal.call(threading.get_ident)
                self._stack, self._portal = stack, portal
            portal = self._portal
        if threading.get_ident() == self._loop_thread:
            raise ClientStateError("a SyncBridge cannot be called from its own event loop")
        return portal

    def call(
        self,
        func: Callable[[*Ts], Awaitable[T]],
        *args: *Ts,
        timeout: float | None = None,
    ) -> T:
        """Run ``await func(*args)`` on the loop and return its result (or raise its error).

        ``timeout`` (seconds, ``None`` = no limit) bounds the wait; when it expires the call
        is cancelled and :class:`streamwire.errors.TimeoutError` is raised.
        """
        portal = self._get_portal()
        future = portal.start_task_soon(func, *args)
        return self._result(future, timeout)

    def run(self, coro_factory: Callable[[], Awaitable[T]], *, timeout: float | None = None) -> T:
        """Like :meth:`call` for a zero-argument factory (``lambda: client.send(data)``)."""
        return self.call(coro_factory, timeout=timeout)

    def _result(self, future: concurrent.futures.Future[T], timeout: float | None) -> T:
        try:
            return future.result(timeout)
        except concurrent.futures.CancelledError as exc:
            raise ClosedError(f"the SyncBridge {self.name!r} closed during the call") from exc
        except builtins.TimeoutError as exc:
            if not future.done():  # the wait expired
                future.cancel()
                raise TimeoutError(
                    f"call through {self.name!r} timed out after {timeout} s"
                ) from exc
            if future.cancelled() or future.exception() is not exc:
                return self._result(future, 0)  # it ended as the wait expired: its outcome
            if isinstance(exc, StreamwireError):
                raise
            # the coroutine's own (asyncio's, a library's) builtin TimeoutError: a streamwire
            # one, so that callers' `except StreamwireError` sees it (still a TimeoutError)
            raise TimeoutError(
                f"call through {self.name!r}: an operation timed out ({exc or 'no detail'})"
            ) from exc

    def close(self) -> None:
        """Cancel running calls, stop the loop and join its thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            if threading.get_ident() == self._loop_thread:
                raise ClientStateError("a SyncBridge cannot be closed from its own event loop")
            self._closed = True
            stack, portal = self._stack, self._portal
            self._stack = self._portal = None
        if portal is not None:
            with contextlib.suppress(RuntimeError):  # already stopped
                portal.call(portal.stop, True)
        if stack is not None:
            stack.close()
