"""What a RabbitMQ producer or consumer needs of the client that made it: a narrow interface,
so that neither imports the client (which imports them). The super streams' own needs are
``superstream.SuperStreamLink``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from streamwire.rabbitmq._connection import Connection
from streamwire.transport.reconnect import ReconnectPolicy

__all__ = ("ClientLink",)

_T = TypeVar("_T")


class ClientLink(Protocol):
    """The part of :class:`streamwire.rabbitmq.Client` its producers and consumers use."""

    host: str
    port: int
    """The address the client was given (the metrics name it until the leader is known)."""
    reconnect: ReconnectPolicy | None
    """The client's reconnect policy (None: a lost connection fails the producer/consumer)."""

    async def retry(
        self, attempt: Callable[[], Awaitable[_T]], cause: BaseException, *, what: str
    ) -> _T:
        """Run ``attempt`` under the reconnect policy."""
        ...

    async def _leader_connection(self, stream: str) -> Connection:
        """A producer connection to ``stream``'s leader with room for one more publisher."""
        ...

    async def _consumer_connection(self, stream: str, *, replica: bool = False) -> Connection:
        """A consumer connection to ``stream``'s leader (or a replica) with room for one
        more subscription."""
        ...

    def _forget_child(self, child: object) -> None:
        """A closed producer or consumer leaves the client's set of children."""
        ...
