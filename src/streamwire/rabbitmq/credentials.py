"""Credentials that change: an OAuth 2 (or any) token handed to RabbitMQ as the PLAIN password
and refreshed before it expires (docs/rabbitmq.md, "Tokens that expire")."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NamedTuple

__all__ = ("Token", "TokenProvider")


class Token(NamedTuple):
    """A secret and when it stops being valid."""

    value: str
    """What the broker receives as the password (e.g. a signed JWT)."""
    expires_at: float | None = None
    """Unix time in seconds; ``None``: never (no refresh)."""


TokenProvider = Callable[[], Awaitable[Token]]
"""An async function returning a fresh :class:`Token` (from an OAuth 2 token endpoint, a
vault, ...). The client calls it once to connect and again before each token expires."""
