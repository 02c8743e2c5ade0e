"""The Liftbridge client's unary gRPC calls, as the parts of the client that make them (its
cursors, its one-message publishing) and its group consumers see them: one declaration instead
of one per part."""

from __future__ import annotations

from typing import Any, Protocol

from streamwire._default import Default

__all__ = ("UnaryCalls",)


class UnaryCalls(Protocol):
    """Unary RPCs at the right server, with the client's default timeout."""

    def _timeout(self, timeout: float | Default | None) -> float | None:
        """``timeout``, or the client's default for ``DEFAULT``."""
        ...

    async def _call(
        self,
        method: str,
        request: Any,
        *,
        timeout: float | None,
        what: str,
        broker: str | None = None,
    ) -> Any:
        """One unary RPC at ``broker``, or at any server."""
        ...
