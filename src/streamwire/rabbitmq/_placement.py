"""Where a RabbitMQ client's connections go: the locator connection to the first seed that
answers, producers to the stream leader's node and consumers to the leader or a replica, as
the broker advertises them in Metadata (through ``address_resolver``, or a load balancer
dialled until the node behind it is the one wanted), shared per (role, advertised node) with
room for 256 producers or consumers each, reopened on demand after a loss.

Connections are shared per (role, advertised host, advertised port). Producers and consumers
never share one: on a connection that also carries Deliver frames (which the broker writes with
sendfile) publish confirms were measured ~50 ms late instead of ~0.5 ms. The locator
connection carries management and metadata requests.

:class:`Placement` is the part of :class:`~streamwire.rabbitmq.client.Client` that does this;
the client holds the state it declares.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from streamwire.errors import ClosedError, ConnectError, StreamwireError
from streamwire.metrics import ConnectionMeter
from streamwire.rabbitmq._connection import Connection
from streamwire.rabbitmq.protocol.constants import ResponseCode
from streamwire.rabbitmq.protocol.errors import ERRORS, StreamNotAvailable
from streamwire.rabbitmq.protocol.machine import ConnectionSettings
from streamwire.rabbitmq.protocol.streams import (
    NO_LEADER,
    MetadataRequest,
    MetadataResponse,
    StreamMetadata,
)
from streamwire.transport.tcp import TcpKeepalive
from streamwire.transport.tls import TLSConfig

__all__ = ("AddressResolver", "Placement", "StreamInfo")

_MAX_CONNECTIONS_PER_NODE = 64
"""Connections per node and role before a client refuses another producer or consumer."""
AddressResolver = Callable[[str, int], tuple[str, int]]


class StreamInfo:
    """Where a stream lives, from Metadata."""

    __slots__ = ("leader", "replicas", "stream")

    def __init__(
        self, stream: str, leader: tuple[str, int], replicas: list[tuple[str, int]]
    ) -> None:
        self.stream = stream
        self.leader = leader
        self.replicas = replicas

    def __repr__(self) -> str:
        return f"StreamInfo({self.stream!r}, leader={self.leader}, replicas={self.replicas})"


class Placement:
    """Opening, sharing and finding connections (the client's state, declared here)."""

    host: str
    port: int
    seeds: tuple[tuple[str, int], ...]
    settings: ConnectionSettings
    tls: TLSConfig | None
    tcp_keepalive: TcpKeepalive | None
    timeout: float | None
    load_balancer: bool
    load_balancer_attempts: int
    load_balancer_delay: float
    _seed_lock: asyncio.Lock
    _resolve: AddressResolver
    _conns: dict[tuple[str, str, int], Connection]
    _locator: Connection | None
    _opening: dict[tuple[str, str, int], asyncio.Task[Connection]]
    _closing: bool
    _meter: ConnectionMeter
    _ever: set[tuple[str, str, int]]

    async def _dial_seeds(self) -> Connection:
        """The locator connection to the first seed that answers, starting with the one that
        answered last; a ConnectError naming every failure when none does."""
        failures: list[str] = []
        for host, port in self.seeds:
            try:
                conn = await self._dial("locator", host, port)
            except (ConnectError, TimeoutError) as exc:
                if len(self.seeds) == 1:
                    raise
                failures.append(f"{host}:{port}: {exc}")
                continue
            if (host, port) != self.seeds[0]:  # start with the node that answered next time
                self.seeds = ((host, port), *(s for s in self.seeds if s != (host, port)))
            self.host, self.port = host, port
            return conn
        raise ConnectError(f"no RabbitMQ node answered: {'; '.join(failures)}")

    async def _open_connection(self, host: str, port: int) -> Connection:
        try:
            return await Connection.open(
                host,
                port,
                self.settings,
                tls=self.tls,
                timeout=self.timeout,
                keepalive=self.tcp_keepalive,
            )
        except StreamwireError:
            self._meter.failed()
            raise

    async def _dial(self, role: str, host: str, port: int) -> Connection:
        conn = await self._open_connection(host, port)
        advertised = _advertised(conn, host, port)
        self._register(conn, {(role, *advertised), (role, host, port)})
        return conn

    def _register(self, conn: Connection, keys: set[tuple[str, str, int]]) -> None:
        if self._closing:  # opened while the client was closing: nobody would close it
            conn.abort()
            raise ClosedError("client is closed")
        for key in keys:
            self._conns[key] = conn
        conn.on_lost.append(lambda exc: self._forget(conn, exc))
        self._meter.connected(again=not self._ever.isdisjoint(keys))
        self._ever |= keys

    async def _dial_through_balancer(self, role: str, wanted: tuple[str, int]) -> Connection:
        """Load-balancer mode: dial the configured address until the node behind it
        advertises ``wanted`` (the Java client's approach); other connections are closed."""
        seen: list[tuple[str, int]] = []
        for _attempt in range(self.load_balancer_attempts):
            conn = await self._open_connection(self.host, self.port)
            advertised = _advertised(conn, self.host, self.port)
            if advertised == wanted:
                self._register(conn, {(role, *wanted)})
                return conn
            seen.append(advertised)
            await conn.close()
            await asyncio.sleep(self.load_balancer_delay)
        raise ConnectError(
            f"the load balancer at {self.host}:{self.port} never led to {wanted[0]}:{wanted[1]}"
            f" in {len(seen)} attempts (reached {sorted(set(seen))})"
        )

    def _forget(self, conn: Connection, exc: StreamwireError | None = None) -> None:
        if exc is not None and not isinstance(exc, ClosedError):  # lost, not closed by us
            self._meter.failed()
        for key in [k for k, c in self._conns.items() if c is conn]:
            del self._conns[key]
        if self._locator is conn:
            self._locator = None

    def _check(self) -> None:
        if self._closing:
            raise ClosedError("client is closed")

    async def _locator_connection(self) -> Connection:
        self._check()
        conn = self._locator
        if conn is not None and conn.is_open:
            return conn
        if len(self.seeds) > 1:
            async with self._seed_lock:  # one redial for every caller waiting
                conn = self._locator
                if conn is None or not conn.is_open:
                    self._locator = conn = await self._dial_seeds()
                return conn
        self._locator = await self._connection_to(
            self.host, self.port, role="locator", dial=(self.host, self.port)
        )
        return self._locator

    async def _connection_to(
        self, host: str, port: int, *, role: str, dial: tuple[str, int] | None = None
    ) -> Connection:
        """A shared open ``role`` connection to the node advertised as ``host:port``."""
        key = (role, host, port)
        conn = self._conns.get(key)
        if conn is not None and conn.is_open:
            return conn
        task = self._opening.get(key)
        if task is None:
            if dial is None and self.load_balancer:
                task = asyncio.ensure_future(self._dial_through_balancer(role, (host, port)))
            else:
                target = dial or self._resolve(host, port)
                task = asyncio.ensure_future(self._dial(role, *target))
            self._opening[key] = task
            task.add_done_callback(lambda _: self._opening.pop(key, None))
        return await asyncio.shield(task)

    async def stream_info(self, stream: str) -> StreamInfo:
        """Leader and replicas of ``stream``; raises StreamDoesNotExist/StreamNotAvailable."""
        md = await self.metadata(stream)
        entry, brokers = md
        if entry.code != ResponseCode.OK:
            raise ERRORS.from_code(entry.code, f"stream {stream!r}")
        if entry.leader == NO_LEADER or entry.leader not in brokers:
            raise StreamNotAvailable(f"stream {stream!r} has no leader yet")
        return StreamInfo(
            stream, brokers[entry.leader], [brokers[r] for r in entry.replicas if r in brokers]
        )

    async def metadata(self, stream: str) -> tuple[StreamMetadata, dict[int, tuple[str, int]]]:
        conn = await self._locator_connection()
        resp = await conn.request(lambda corr: MetadataRequest(corr, (stream,)), MetadataResponse)
        brokers = {b.reference: (b.host, b.port) for b in resp.brokers}
        for entry in resp.streams:
            if entry.stream == stream:
                return entry, brokers
        raise ERRORS.from_code(ResponseCode.STREAM_DOES_NOT_EXIST, f"stream {stream!r}")

    async def _leader_connection(self, stream: str) -> Connection:
        info = await self.stream_info(stream)
        return await self._connection_with_room(
            *info.leader, role="producer", has_room=lambda c: c.publisher_room
        )

    async def _consumer_connection(self, stream: str, *, replica: bool = False) -> Connection:
        info = await self.stream_info(stream)
        node = random.choice(info.replicas) if replica and info.replicas else info.leader
        return await self._connection_with_room(
            *node, role="consumer", has_room=lambda c: c.subscriber_room
        )

    async def _connection_with_room(
        self, host: str, port: int, *, role: str, has_room: Callable[[Connection], bool]
    ) -> Connection:
        """A shared ``role`` connection to ``host:port`` with room for one more publisher
        or subscription: a node's first connection while it has room, then a second, a
        third... (ids are one byte, so 256 producers or consumers fit one connection; the
        Java and Go clients open another connection the same way)."""
        for slot in range(_MAX_CONNECTIONS_PER_NODE):
            conn = await self._connection_to(host, port, role=f"{role}#{slot}" if slot else role)
            if has_room(conn):
                return conn
        raise ClosedError(
            f"{_MAX_CONNECTIONS_PER_NODE} {role} connections to {host}:{port} are full "
            f"({_MAX_CONNECTIONS_PER_NODE * 256} {role}s)"
        )


def _advertised(conn: Connection, host: str, port: int) -> tuple[str, int]:
    """The (host, port) a connection's node advertises in its Open response."""
    props = conn.opened.connection_properties if conn.opened else {}
    advertised_port = props.get("advertised_port", "")
    return (
        props.get("advertised_host", host),
        int(advertised_port) if advertised_port.isdigit() else port,
    )
