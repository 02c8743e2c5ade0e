"""What Liftbridge's producers and consumers need of the client that made them: narrow
interfaces, so that none of them imports the client (which imports them all)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from streamwire._default import DEFAULT, Default
from streamwire.errors import StreamwireError
from streamwire.liftbridge._calls import UnaryCalls
from streamwire.liftbridge._grpc_publish import PublishChannels
from streamwire.liftbridge._h2_subscription import AnySubscription
from streamwire.liftbridge._nats_side import NatsSide
from streamwire.liftbridge._stream_reader import Handover
from streamwire.liftbridge.protocol._pb import api_pb2 as pb
from streamwire.liftbridge.protocol.metadata import Metadata, PartitionInfo, StreamInfo
from streamwire.transport.reconnect import ReconnectPolicy

__all__ = ("ConsumerLink", "GroupLink", "ProducerLink")

_T = TypeVar("_T")


class ProducerLink(PublishChannels, Protocol):
    """The part of :class:`streamwire.liftbridge.Client` a producer uses: its NATS side
    (publishing and acks), the gRPC side of a ``transport="grpc"`` publisher
    (:class:`~streamwire.liftbridge._grpc_publish.PublishChannels`) and the stream's
    metadata."""

    _nats: NatsSide
    nats_error: StreamwireError | None
    """Why the client has no NATS connection, if it has none."""

    @property
    def nats_connected(self) -> bool:
        """Whether the client's NATS connection is up now."""
        ...

    async def stream_info(
        self, name: str, *, timeout: float | Default | None = DEFAULT
    ) -> StreamInfo:
        """The stream's metadata (subject, partitions)."""
        ...

    def _forget_child(self, child: object) -> None:
        """A closed producer or consumer leaves the client's set of children."""
        ...


class ConsumerLink(Protocol):
    """The part of :class:`streamwire.liftbridge.Client` a consumer uses."""

    host: str
    port: int
    reconnect: ReconnectPolicy | None
    request_timeout: float | None

    def _invalidate_metadata(self) -> None:
        """Forget the cached metadata (a leader moved)."""
        ...

    async def _retry(
        self, attempt: Callable[[], Awaitable[_T]], cause: BaseException, *, what: str
    ) -> _T:
        """Run ``attempt`` under the client's reconnect policy."""
        ...

    async def _subscription(
        self,
        request: pb.SubscribeRequest,
        handover: Handover[Any],
        *,
        skip_below: int,
        server_headers: bool,
        any_replica: bool = False,
    ) -> AnySubscription:
        """A subscription, not started, to ``request``'s partition."""
        ...

    async def partition_metadata(
        self, stream: str, partition: int = 0, *, timeout: float | Default | None = DEFAULT
    ) -> PartitionInfo:
        """Fresh metadata of one partition, from its leader."""
        ...

    async def set_cursor(
        self,
        stream: str,
        partition: int,
        cursor_id: str,
        offset: int,
        *,
        timeout: float | Default | None = DEFAULT,
    ) -> None:
        """Store a cursor."""
        ...

    async def fetch_cursor(
        self,
        stream: str,
        partition: int,
        cursor_id: str,
        *,
        timeout: float | Default | None = DEFAULT,
    ) -> int | None:
        """A stored cursor (None: none)."""
        ...

    def _forget_child(self, child: object) -> None:
        """A closed producer or consumer leaves the client's set of children."""
        ...


class GroupLink(ConsumerLink, UnaryCalls, Protocol):
    """What a group consumer uses besides a consumer's: unary calls and metadata."""

    async def fetch_metadata(
        self, *streams: str, timeout: float | Default | None = DEFAULT
    ) -> Metadata:
        """Metadata of ``streams`` (every stream when none is named)."""
        ...
