"""The Liftbridge client's NATS connection as its producers use it: :class:`NatsSide`.

One NATS connection per client carries every producer's envelopes, and one ack inbox on it
(``_acks.AckRouter``) receives every ack. The client attaches both once NATS is set up and
detaches them when it drops NATS; producers publish, draw correlation ids and register the
acks they await here, and never touch the client's NATS fields.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from streamwire.codec.message import Confirmation
from streamwire.errors import ClosedError
from streamwire.liftbridge._acks import AckRouter
from streamwire.liftbridge._nats import NatsLink

__all__ = ("NatsSide",)


def _closed() -> ClosedError:
    return ClosedError("the Liftbridge client is closed")


class NatsSide:
    """The NATS link and the ack inbox of a client, while it has them."""

    __slots__ = ("acks", "closed", "link", "max_payload")

    def __init__(self) -> None:
        self.link: NatsLink | None = None
        self.acks: AckRouter | None = None
        self.max_payload = 1 << 20
        """The NATS server's max_payload (the largest envelope it takes)."""
        self.closed = False
        """The client closed: nothing is published any more."""

    # --- set up by the client ------------------------------------------------------------

    def attach(self, link: NatsLink, acks: AckRouter) -> None:
        """NATS is connected, with ``acks`` subscribed to its inbox."""
        self.link, self.acks = link, acks
        self.max_payload = link.max_payload

    def detach(self) -> NatsLink | None:
        """Forget the link and the inbox (a NATS connection dropped half-way, or the client
        closing); returns the link, for the caller to close."""
        link, self.link, self.acks = self.link, None, None
        return link

    @property
    def inbox(self) -> str:
        """The ack inbox's subject (empty while there is none)."""
        return "" if self.acks is None else self.acks.ack_inbox

    @property
    def connected(self) -> bool:
        """Set up (the inbox subscribed) and connected now."""
        link = self.link
        return link is not None and self.acks is not None and not self.closed and link.is_connected

    # --- used by producers ---------------------------------------------------------------

    def _router(self) -> AckRouter:
        if self.acks is None:
            raise _closed()
        return self.acks

    def next_id(self) -> str:
        """A fresh correlation id."""
        return self._router().next_id()

    def next_ids(self, count: int) -> list[str]:
        """``count`` fresh correlation ids."""
        return self._router().next_ids(count)

    def expect(
        self,
        cid: str,
        timeout: float | None,
        what: str,
        on_done: Callable[[asyncio.Future[Confirmation]], object] | None = None,
    ) -> asyncio.Future[Confirmation]:
        """The future of ``cid``'s ack (failing with AckTimeout after ``timeout``)."""
        return self._router().expect(cid, timeout, what, on_done)

    def forget(self, cid: str) -> None:
        """Stop waiting for ``cid``'s ack."""
        if self.acks is not None:
            self.acks.forget(cid)

    def reply_subject(self, cid: str) -> str:
        """The reply subject that makes NATS report "no responders" for ``cid``."""
        return self._router().reply_subject(cid)

    def _open_link(self) -> NatsLink:
        link = self.link
        if link is None or self.closed:
            raise _closed()
        return link

    async def publish(
        self, subject: str, data: bytes, reply: str, timeout: float | None = None
    ) -> None:
        """Publish one message (waiting up to ``timeout`` for nats-py's buffer)."""
        await self._open_link().publish(subject, data, reply, timeout=timeout)

    async def publish_many(
        self, messages: Sequence[tuple[str, bytes, str]], timeout: float | None = None
    ) -> None:
        """Publish ``(subject, data, reply)`` messages in one write."""
        await self._open_link().publish_many(messages, timeout=timeout)

    async def flush(self, timeout: float | None) -> None:
        """Write out what nats-py buffered and wait for the server's PONG."""
        link = self.link
        if link is None:
            raise _closed()
        await link.flush(timeout)
