"""A fault-injecting TCP proxy for tests (loopback only).

``FaultProxy(upstream_host, upstream_port)`` listens on 127.0.0.1 (a free port) and relays
bytes both ways. On command it can:

* ``cut()``: reset every open connection (RST, via SO_LINGER 0), as a crash or cable pull;
* ``blackhole(True)``: keep sockets open but forward nothing (a half-open connection);
* ``refuse(True)``: accept and immediately reset new connections (broker down);
* ``latency``: delay each forwarded chunk by that many seconds;
* ``bandwidth``: cap throughput in bytes per second per direction.

Every loop is bounded by the proxy's lifetime; ``aclose()`` stops everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass, field

__all__ = ("FaultProxy",)


@dataclass
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    def __init__(self, upstream_host: str, upstream_port: int, *more: tuple[str, int]) -> None:
        """Relay to ``upstream_host:upstream_port``; with ``more`` upstreams, new
        connections go to each in turn (a round-robin load balancer)."""
        self.upstreams = [(upstream_host, upstream_port), *more]
        self.upstream = self.upstreams[0]
        self._turn = 0
        self.latency = 0.0
        self.bandwidth: int | None = None
        self._blackhole = asyncio.Event()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refuse = False
        self._links: list[_Link] = []
        self._server: asyncio.Server | None = None
        self.port = 0
        self.connections_made = 0

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def blackhole(self, on: bool) -> None:
        if on:
            self._blackhole.set()
            self._flowing.clear()
        else:
            self._blackhole.clear()
            self._flowing.set()

    def refuse(self, on: bool) -> None:
        self._refuse = on

    def cut(self) -> int:
        """Reset every open connection; returns how many were cut."""
        links, self._links = self._links, []
        for link in links:
            _reset(link.client)
            _reset(link.upstream)
            for task in link.tasks:
                task.cancel()
        return len(links)

    @property
    def open_connections(self) -> int:
        return len(self._links)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refuse:
            _reset(writer)
            return
        target = self.upstreams[self._turn % len(self.upstreams)]
        self._turn += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            _reset(writer)
            return
        self.connections_made += 1
        link = _Link(writer, up_writer)
        link.tasks = [
            asyncio.create_task(self._pump(reader, up_writer, link)),
            asyncio.create_task(self._pump(up_reader, writer, link)),
        ]
        self._links.append(link)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link
    ) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                await self._flowing.wait()
                if self.latency:
                    await asyncio.sleep(self.latency)
                if self.bandwidth:
                    await asyncio.sleep(len(data) / self.bandwidth)
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if link in self._links:
                self._links.remove(link)
                _reset(link.client)
                _reset(link.upstream)

    async def aclose(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
