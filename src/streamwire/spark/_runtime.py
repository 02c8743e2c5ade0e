"""One event loop and one client per broker URL, per Python worker process.

PySpark forks Python workers from a daemon and reuses them across tasks, batches and even
queries (``spark.python.worker.reuse``). Each worker keeps here one :class:`SyncBridge`
(a private event loop thread) and the clients it opened, keyed by URL and connect
options, so a worker serving many partitions holds one connection per broker instead of
one per task. Nothing starts at import time; everything is keyed by ``os.getpid()`` so a
forked child never uses its parent's loop or sockets.

Only the *connection* is shared: producers and consumers are opened and closed by each
task (a RabbitMQ publisher reference may be live only once, and partitions move between
workers from batch to batch).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import streamwire
from streamwire.spark.errors import BrokerUnavailableError

__all__ = ("ClientKey", "WorkerRuntime", "close_runtime", "runtime")

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: (url, sorted connect options)
ClientKey = tuple[str, tuple[tuple[str, Any], ...]]

#: Errors after which a cached client is dropped and opened again once.
STALE_CLIENT_ERRORS = (streamwire.TransportError, streamwire.ClosedError)
#: What a broker gone for a while (restarting, paused, behind a black hole) gives a call:
#: what :meth:`WorkerRuntime.with_client` waits out when it has patience.
UNAVAILABLE_ERRORS = (*STALE_CLIENT_ERRORS, streamwire.TimeoutError)
#: Seconds a client dropped as unavailable gets to close (its link may be silent).
DROP_CLOSE_TIMEOUT = 1.0


class WorkerRuntime:
    """The per-process loop and client cache. Use :func:`runtime` to get it."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.bridge = streamwire.SyncBridge(name=f"streamwire-spark-{self.pid}")
        self._clients: dict[ClientKey, streamwire.Client] = {}
        self._lock = threading.Lock()

    def call(self, func: Callable[[], Awaitable[T]], *, timeout: float | None = None) -> T:
        """Run ``await func()`` on this process's loop and return the result."""
        return self.bridge.run(func, timeout=timeout)

    def client(self, key: ClientKey) -> streamwire.Client:
        """The cached client for ``key``, connecting first if there is none."""
        with self._lock:
            cached = self._clients.get(key)
        if cached is not None:
            return cached
        url, options = key

        async def connect() -> streamwire.Client:
            return await streamwire.connect(url, **dict(options))

        client = self.call(connect)
        with self._lock:
            other = self._clients.setdefault(key, client)
        if other is not client:  # another thread connected meanwhile
            self._close(client)
        return other

    def with_client(
        self,
        key: ClientKey,
        use: Callable[[streamwire.Client], T],
        *,
        patience: float = 0.0,
        interval: float = 1.0,
    ) -> T:
        """``use(client)``; when that fails because the cached connection went stale
        (closed, or the broker restarted), once more with a fresh client. ``use`` must be
        safe to repeat: it should only open things (producers, consumers, metadata).

        With ``patience`` (seconds), a broker that refuses, resets or does not answer is
        waited for: the client is dropped and ``use`` tried again on a fresh one (at once,
        then every ``interval`` seconds) while fewer than ``patience`` seconds passed since
        the first failure (the last try gets its own timeout); then
        :class:`BrokerUnavailableError`. An answer the broker marks as retriable is waited
        for too, and a stream not found once the broker failed first (one restarting may
        not know it yet): :func:`_transient`."""
        if patience <= 0:
            client = self.client(key)
            try:
                return use(client)
            except STALE_CLIENT_ERRORS as exc:
                logger.info("reconnecting to %s after: %s", streamwire.parse_url(key[0]), exc)
                self.discard(key, client)
                return use(self.client(key))
        return self._patiently(key, use, patience, interval)

    def _patiently(
        self,
        key: ClientKey,
        use: Callable[[streamwire.Client], T],
        patience: float,
        interval: float,
    ) -> T:
        first: float | None = None
        attempts = 0
        while True:
            client: streamwire.Client | None = None
            try:
                client = self.client(key)
                return use(client)
            except (
                *UNAVAILABLE_ERRORS,
                streamwire.StreamNotFoundError,
                streamwire.ServerError,
            ) as exc:
                if not _transient(exc, after_failure=attempts > 0):
                    raise
                attempts += 1
                if client is not None:
                    self.discard(key, client, close_timeout=DROP_CLOSE_TIMEOUT)
                now = time.monotonic()
                first = now if first is None else first
                pause = 0.0 if attempts == 1 else interval
                where = streamwire.parse_url(key[0])
                if now - first >= patience:
                    raise BrokerUnavailableError(
                        f"{where} did not answer for {now - first:.1f} s after the first "
                        f"failure ({attempts} attempts; the last: {type(exc).__name__}: {exc}): "
                        "the broker is down, paused or unreachable from this process. Check "
                        "it and run the query again (a streaming query resumes from its "
                        "checkpoint); the option 'timeout' sets how long to wait"
                    ) from exc
                logger.log(
                    logging.INFO if attempts == 1 else logging.WARNING,
                    "%s is unavailable (%s: %s); trying again in %.1f s",
                    where,
                    type(exc).__name__,
                    exc,
                    pause,
                )
                time.sleep(min(pause, patience - (now - first)))

    def discard(
        self, key: ClientKey, client: streamwire.Client, *, close_timeout: float = 10.0
    ) -> None:
        """Forget (and close) ``client`` if it is still the cached one for ``key``."""
        with self._lock:
            if self._clients.get(key) is client:
                del self._clients[key]
        self._close(client, close_timeout)

    def _close(self, client: streamwire.Client, timeout: float = 10.0) -> None:
        with contextlib.suppress(streamwire.StreamwireError):
            self.call(client.close, timeout=timeout)

    def close(self) -> None:
        """Close every client and stop the loop."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            self._close(client)
        self.bridge.close()


def _transient(exc: Exception, *, after_failure: bool) -> bool:
    """Whether a patient call waits ``exc`` out: the broker unreachable or silent; an answer
    the broker marks as one that may change (``ServerError.retriable``: Liftbridge's "not
    the partition leader" while it elects one); and, once a call failed, a stream not
    found (a broker just started again on its data may not know its streams yet: a
    Liftbridge server says "does not exist" until it has replayed its metadata)."""
    if isinstance(exc, UNAVAILABLE_ERRORS):
        return True
    if isinstance(exc, streamwire.StreamNotFoundError):
        return after_failure
    return isinstance(exc, streamwire.ServerError) and exc.retriable


_runtime: WorkerRuntime | None = None
_runtime_lock = threading.Lock()


def _after_fork_in_child() -> None:
    # the parent's loop thread does not exist here, and its lock may have been held
    global _runtime, _runtime_lock
    _runtime, _runtime_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def runtime() -> WorkerRuntime:
    """This process's runtime, created on first use (and again in a forked child)."""
    global _runtime
    with _runtime_lock:
        current = _runtime
        if current is None or current.pid != os.getpid():
            current = _runtime = WorkerRuntime()
        return current


def close_runtime() -> None:
    """Close this process's clients and loop (the next :func:`runtime` starts afresh)."""
    global _runtime
    with _runtime_lock:
        current, _runtime = _runtime, None
    if current is not None and current.pid == os.getpid():
        current.close()
