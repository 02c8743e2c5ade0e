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


def refresh_delay(remaining: float) -> float:
    """Seconds to wait before asking for the next token when the current one has
    ``remaining`` seconds to live: when 80 % of that has passed, or a second before it ends
    if that comes first (a JWT's ``exp`` is whole seconds, and RabbitMQ closes a connection
    the moment its token expires), and never sooner than half a second."""
    return max(0.5, min(0.8 * remaining, remaining - 1.0))
