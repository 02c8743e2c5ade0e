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
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import streamwire

__all__ = ("ClientKey", "WorkerRuntime", "close_runtime", "runtime")

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: (url, sorted connect options)
ClientKey = tuple[str, tuple[tuple[str, Any], ...]]

#: Errors after which a cached client is dropped and opened again once.
STALE_CLIENT_ERRORS = (streamwire.TransportError, streamwire.ClosedError)


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

    def discard(self, key: ClientKey, client: streamwire.Client) -> None:
        """Forget (and close) ``client`` if it is still the cached one for ``key``."""
        with self._lock:
            if self._clients.get(key) is client:
                del self._clients[key]
        self._close(client)

    def with_client(self, key: ClientKey, use: Callable[[streamwire.Client], T]) -> T:
        """``use(client)``; when that fails because the cached connection went stale
        (closed, or the broker restarted), once more with a fresh client. ``use`` must be
        safe to repeat: it should only open things (producers, consumers, metadata)."""
        client = self.client(key)
        try:
            return use(client)
        except STALE_CLIENT_ERRORS as exc:
            logger.info("reconnecting to %s after: %s", streamwire.parse_url(key[0]), exc)
            self.discard(key, client)
            return use(self.client(key))

    def _close(self, client: streamwire.Client) -> None:
        with contextlib.suppress(streamwire.StreamwireError):
            self.call(client.close, timeout=10.0)

    def close(self) -> None:
        """Close every client and stop the loop."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            self._close(client)
        self.bridge.close()


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
