"""How a RabbitMQ producer or consumer follows its stream when it loses its connection, or
when a metadata update says the stream's leader moved: one recovery task under the client's
reconnect policy, or the end (no policy, the stream is gone, the client closed)."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from streamwire.errors import ClosedError, StreamwireError
from streamwire.rabbitmq._connection import Connection
from streamwire.rabbitmq._link import ClientLink
from streamwire.rabbitmq.protocol.errors import ERRORS, StreamDoesNotExist

__all__ = ("Recovery",)


class Recovery:
    """The connection-listener part of :class:`~streamwire.rabbitmq.Producer` and
    :class:`~streamwire.rabbitmq.Consumer`. It declares what it uses of them; each says how
    it leaves a connection (:meth:`_detach`), how it ends (:meth:`_give_up`) and how it
    recovers (:meth:`_recover`)."""

    ROLE: ClassVar[str]
    """``producer`` or ``consumer``: names the recovery task."""
    stream: str
    _client: ClientLink
    _conn: Connection | None
    _closed: bool
    _error: StreamwireError | None
    _recovering: asyncio.Task[None] | None

    def metadata_changed(self, stream: str, code: int) -> None:
        if stream == self.stream:
            self._lost(ERRORS.from_code(code, f"stream {stream!r} changed (metadata update)"))

    def connection_lost(self, exc: StreamwireError) -> None:
        self._lost(exc)

    def _lost(self, exc: StreamwireError) -> None:
        fatal = self._unrecoverable(exc)
        conn, self._conn = self._conn, None
        if conn is not None:
            self._detach(conn)
        if self._closed or self._error is not None or self._recovering is not None:
            return
        if fatal is not None:
            self._give_up(fatal)
            return
        if self._client.reconnect is None or isinstance(exc, ClosedError | StreamDoesNotExist):
            self._give_up(exc)
            return
        self._recovering = asyncio.create_task(
            self._recover(exc), name=f"streamwire-{self.ROLE}-recover {self.stream}"
        )

    def _unrecoverable(self, exc: StreamwireError) -> StreamwireError | None:
        """The error to end with instead of recovering from ``exc``, when a new connection
        would meet the same end (``None``: recover)."""
        return None

    def _detach(self, conn: Connection) -> None:
        """Leave ``conn`` (lost, or on the wrong node now)."""
        raise NotImplementedError

    def _give_up(self, exc: StreamwireError) -> None:
        """End for good with ``exc``."""
        raise NotImplementedError

    async def _recover(self, cause: StreamwireError) -> None:
        """Come back on a new connection; runs as the recovery task."""
        raise NotImplementedError
