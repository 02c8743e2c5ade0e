"""Helpers for the transport tests: throwaway local servers."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Protocol

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class LocalServer:
    """An asyncio server on 127.0.0.1, port 0, that cleans up every connection it served."""

    def __init__(self, handler: Handler, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.ssl_context = ssl_context
        self.host = "127.0.0.1"
        self.port = 0
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> LocalServer:
        self._server = await asyncio.start_server(self._serve, self.host, 0, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.append(writer)
        self.connections += 1
        try:
            await self.handler(reader, writer)
        except (OSError, EOFError):
            pass  # the client went away mid-test: expected in failure tests
        finally:
            writer.close()
            with contextlib.suppress(OSError, asyncio.TimeoutError):
                async with asyncio.timeout(1.0):
                    await writer.wait_closed()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for writer in self._writers:
            writer.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Send back everything received until EOF."""
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


class ServerFactory(Protocol):
    """The ``start_server`` fixture."""

    def __call__(
        self, handler: Handler, *, ssl_context: ssl.SSLContext | None = None
    ) -> Awaitable[LocalServer]: ...


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
