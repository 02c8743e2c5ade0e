"""What an Iggy producer or consumer needs of the client that made it: a narrow interface, so
that neither imports the client (which imports them)."""

from __future__ import annotations

from typing import Protocol

from streamwire.iggy._connection import Connection
from streamwire.iggy.protocol.machine import MachineSettings

__all__ = ("ClientLink",)


class ClientLink(Protocol):
    """The part of :class:`streamwire.iggy.Client` its producers and consumers use."""

    host: str
    port: int
    """The server's address (the metrics name it)."""
    settings: MachineSettings
    """The connection machine's settings (the producer reads its batch limits)."""

    async def _dial_with_retry(self, what: str, *, again: bool = False) -> Connection:
        """A new logged-in connection, retried under the client's reconnect policy."""
        ...

    def _forget(self, child: object) -> None:
        """A closed producer or consumer leaves the client's set of children."""
        ...
