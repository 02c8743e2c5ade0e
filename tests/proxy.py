"""A fault-injecting TCP proxy for tests (loopback only).

``FaultProxy(upstream_host, upstream_port)`` listens on 127.0.0.1 (a free port) and relays
bytes both ways. On command it can:

* ``cut()``: reset every open connection (RST, via SO_LINGER 0), as a crash or cable pull;
* ``blackhole(True)``: keep sockets open but forward nothing (a half-open connection);
* ``refuse(True)``: accept and immediately reset new connections (broker down);
* ``latency``: delay each forwarded chunk by that many seconds;
* ``bandwidth``: cap throughput in bytes per second per direction.

Every loop is bounded by the proxy's lifetime; ``aclose()`` stops everything. ``bytes_down``
and ``bytes_up`` count what was forwarded (to the clients, to the upstreams).

Also here, for fault scenarios: :func:`wait_until` (a condition, within a time limit) and
:class:`LeakCheck` (no task or socket left behind after close).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tests.holders import describe_grpc_holders
from tests.sockets import describe_sockets, open_sockets

__all__ = ("FaultProxy", "LeakCheck", "wait_until")


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
        #: Bytes forwarded from the upstreams to the clients, and the other way.
        self.bytes_down = 0
        self.bytes_up = 0

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
            asyncio.create_task(self._pump(reader, up_writer, link, upstream=True)),
            asyncio.create_task(self._pump(up_reader, writer, link, upstream=False)),
        ]
        self._links.append(link)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        *,
        upstream: bool = False,
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
                if upstream:
                    self.bytes_up += len(data)
                else:
                    self.bytes_down += len(data)
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


async def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, *, step: float = 0.02
) -> None:
    """Poll ``condition`` every ``step`` seconds (0: at every turn of the event loop); fail
    the test with ``what`` if it is still false after ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                if condition():
                    return
                await asyncio.sleep(step)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None


class LeakCheck:
    """What runs and what is open now, to compare with after a scenario.

    Create it when the scenario's fixtures are up; after closing the clients under test,
    ``await check.verify()`` waits (bounded) until every asyncio task and every socket created
    since is gone, and fails naming what is left.
    """

    def __init__(self) -> None:
        self._tasks = set(asyncio.all_tasks())
        self._sockets = open_sockets()

    def leftovers(
        self, expected: frozenset[str] = frozenset()
    ) -> tuple[list[asyncio.Task[object]], list[str]]:
        current = asyncio.current_task()
        tasks = [
            t
            for t in asyncio.all_tasks()
            if t not in self._tasks and t is not current and not t.done()
        ]
        sockets = sorted(open_sockets() - self._sockets - expected)
        return tasks, sockets

    async def verify(self, timeout: float = 5.0, *, expected: Iterable[int] = ()) -> None:
        """``expected``: descriptors of sockets that may be new (e.g. a server listening
        again after a restart)."""
        known: set[str] = set()
        for fd in expected:
            with contextlib.suppress(OSError):
                known.add(os.readlink(f"/proc/self/fd/{fd}"))
        allowed = frozenset(known)
        try:
            await wait_until(lambda: not any(self.leftovers(allowed)), timeout, "")
        except AssertionError:
            tasks, sockets = self.leftovers(allowed)
            described = describe_sockets(sockets)
            holders = describe_grpc_holders() if sockets else ""
            gc.collect()
            freed = sorted(set(sockets) - open_sockets())
            raise AssertionError(
                f"left {timeout} s after close: tasks {tasks}, sockets {described}"
                + (f"\ngrpc.aio objects not freed:\n{holders}" if holders else "")
                + (f"\nclosed by gc.collect() (a cycle held them): {freed}" if freed else "")
            ) from None
