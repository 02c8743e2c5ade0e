"""A fault-injecting TCP proxy (loopback only), for any test and for benchmarks of faults.

``FaultProxy(upstream_host, upstream_port)`` listens on 127.0.0.1 (a free port) and relays
bytes both ways, on the event loop that started it. :class:`ThreadedFaultProxy` runs one on
a loop thread of its own, for code that blocks (a Spark job, a subprocess) and for clients
in other processes. On command it can:

* ``cut()``: reset every open connection (RST, via SO_LINGER 0), as a crash or cable pull;
* ``cut(hold=s)``: a *dirty* cut: forward nothing more, keep reading and dropping what the
  peers write for ``s`` seconds (bytes a client wrote, and its kernel acknowledged, that
  never reach the broker; replies that never reach the client), then reset both sides;
* ``cut_at(n, ...)``: the same once ``n`` bytes in all went upstream (a cut at a chosen
  point of a workload, without a timer), for several marks;
* ``blackhole(True)``: keep sockets open but forward nothing (a stall: no reset, no FIN);
* ``refuse(True)``: accept and immediately reset new connections (broker down);
* ``latency``: hold each forwarded chunk that many seconds, one after the other (a link that
  slows down as it is used);
* ``delay``: deliver each chunk that many seconds after it arrived, in order, without holding
  up the ones behind it (a long link: its round trip grows, its throughput does not shrink);
* ``set_loss(p)``: drop each packet between the clients and the proxy with probability
  ``p`` (iptables, in the kernel: TCP retransmits, as on a lossy link);
* ``bandwidth``: cap throughput in bytes per second per direction.

Every loop is bounded by the proxy's lifetime; ``aclose()`` stops everything. ``bytes_down``
and ``bytes_up`` count what was forwarded (to the clients, to the upstreams), ``dropped`` what
a dirty cut or a black hole swallowed, ``cuts`` the cuts done. Standard library only (and
iptables, for loss).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from .partition import heal, lose

__all__ = ("FaultProxy", "ThreadedFaultProxy")

T = TypeVar("T")


@dataclass
class _Link:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    dropping: bool = False


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
        self.delay = 0.0
        self.bandwidth: int | None = None
        self._loss_chain: str | None = None
        self._blackhole = asyncio.Event()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refuse = False
        self._links: list[_Link] = []
        self._server: asyncio.Server | None = None
        self._marks: list[tuple[int, float]] = []
        self._background: set[asyncio.Task[None]] = set()
        self.port = 0
        self.connections_made = 0
        #: Bytes forwarded from the upstreams to the clients, and the other way.
        self.bytes_down = 0
        self.bytes_up = 0
        #: Bytes read and never forwarded (dirty cuts).
        self.dropped = 0
        #: Cuts done (each resets every connection open then), and the upstream byte count
        #: at each.
        self.cuts: list[int] = []

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

    def cut(self, hold: float = 0.0) -> int:
        """Reset every open connection; returns how many were cut. With ``hold`` seconds,
        a dirty cut: the connections forward nothing from now on, what the peers write
        meanwhile is read and dropped, and they are reset after ``hold`` seconds."""
        self.cuts.append(self.bytes_up)
        if hold <= 0:
            return self._reset_all(list(self._links))
        links = list(self._links)
        for link in links:
            link.dropping = True
        task = asyncio.get_running_loop().create_task(self._reset_later(links, hold))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return len(links)

    def cut_at(self, *marks: int, hold: float = 0.0) -> None:
        """A cut (dirty with ``hold``) as soon as ``bytes_up`` reaches each of ``marks``."""
        self._marks = sorted([*self._marks, *((m, hold) for m in marks)])

    async def _reset_later(self, links: list[_Link], hold: float) -> None:
        await asyncio.sleep(hold)
        self._reset_all(links)

    def _reset_all(self, links: list[_Link]) -> int:
        for link in links:
            if link in self._links:
                self._links.remove(link)
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

    def _passed(self) -> None:
        """Cut at the marks ``bytes_up`` went past."""
        while self._marks and self.bytes_up >= self._marks[0][0]:
            _, hold = self._marks.pop(0)
            self.cut(hold)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        *,
        upstream: bool = False,
    ) -> None:
        """Read one direction into its delay line (bounded: a stalled side stops the
        reads), with the time each chunk arrived; an empty chunk ends it."""
        line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=64)
        deliver = asyncio.get_running_loop().create_task(
            self._deliver(line, writer, link, upstream=upstream)
        )
        link.tasks.append(deliver)
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                await line.put((time.monotonic(), data))
        await line.put((time.monotonic(), b""))

    async def _deliver(
        self,
        line: asyncio.Queue[tuple[float, bytes]],
        writer: asyncio.StreamWriter,
        link: _Link,
        *,
        upstream: bool,
    ) -> None:
        """Forward one direction's chunks in order, each no sooner than ``delay`` after it
        arrived; at the end, reset the link."""
        try:
            while True:
                arrived, data = await line.get()
                if not data:
                    break
                await self._flowing.wait()
                if link.dropping:
                    self.dropped += len(data)
                    continue
                wait = arrived + self.delay - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if self.latency:
                    await asyncio.sleep(self.latency)
                if self.bandwidth:
                    await asyncio.sleep(len(data) / self.bandwidth)
                writer.write(data)
                if upstream:
                    self.bytes_up += len(data)
                    self._passed()
                else:
                    self.bytes_down += len(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            if link in self._links and not link.dropping:
                self._reset_all([link])

    def set_loss(self, probability: float) -> None:
        """Drop each packet between the clients and the proxy with ``probability``, both
        ways, in the kernel (iptables; root): TCP sees real loss and retransmits. 0 stops
        it. :class:`~integration.harness.partition.Unavailable` where it cannot."""
        if probability > 0:
            self._loss_chain = lose(self.port, probability)
        elif self._loss_chain is not None:
            heal(chain=self._loss_chain)
            self._loss_chain = None

    async def aclose(self) -> None:
        self.set_loss(0)
        self._marks = []
        self._reset_all(list(self._links))
        for task in list(self._background):
            task.cancel()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()


class ThreadedFaultProxy:
    """A :class:`FaultProxy` on an event loop thread of its own, driven by blocking calls::

    with ThreadedFaultProxy("127.0.0.1", 5552) as proxy:
        proxy.cut_at(1_000_000, 3_000_000, hold=0.3)
        run_a_job(f"rabbitmq-stream://127.0.0.1:{proxy.port}")
        assert len(proxy.cuts) == 2
    """

    def __init__(self, upstream_host: str, upstream_port: int, *more: tuple[str, int]) -> None:
        self._upstreams = (upstream_host, upstream_port, more)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="fault-proxy", daemon=True
        )
        self._proxy: FaultProxy | None = None

    def _run(self, make: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
        async def wrapped() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(wrapped(), self._loop).result(timeout)

    def start(self) -> ThreadedFaultProxy:
        self._thread.start()
        host, port, more = self._upstreams
        self._proxy = self._run(lambda: FaultProxy(host, port, *more).start())
        return self

    def __enter__(self) -> ThreadedFaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def proxy(self) -> FaultProxy:
        if self._proxy is None:
            raise RuntimeError("the proxy is not started")
        return self._proxy

    @property
    def port(self) -> int:
        return self.proxy.port

    @property
    def cuts(self) -> list[int]:
        return list(self.proxy.cuts)

    @property
    def bytes_up(self) -> int:
        return self.proxy.bytes_up

    @property
    def dropped(self) -> int:
        return self.proxy.dropped

    @property
    def connections_made(self) -> int:
        return self.proxy.connections_made

    def cut(self, hold: float = 0.0) -> int:
        async def cut() -> int:
            return self.proxy.cut(hold)

        return self._run(cut)

    def cut_at(self, *marks: int, hold: float = 0.0) -> None:
        async def mark() -> None:
            self.proxy.cut_at(*marks, hold=hold)

        self._run(mark)

    def blackhole(self, on: bool) -> None:
        async def switch() -> None:
            self.proxy.blackhole(on)

        self._run(switch)

    def close(self) -> None:
        if self._proxy is not None:
            with contextlib.suppress(Exception):
                self._run(self._proxy.aclose)
            self._proxy = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if not self._loop.is_closed() and not self._loop.is_running():
            self._loop.close()
