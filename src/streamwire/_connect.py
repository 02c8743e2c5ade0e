"""``streamwire.connect(url)``: dispatch on the URL scheme to the protocol package."""

from __future__ import annotations

import importlib
from collections.abc import Generator
from types import TracebackType
from typing import Any

from streamwire._api import Client
from streamwire._url import parse_url
from streamwire.errors import ConfigurationError

__all__ = ("Client", "ConnectHandle", "connect")


class ConnectHandle:
    """Returned by :func:`connect`: ``await`` it for a client, or use it with ``async with``
    (the client is closed on exit)."""

    __slots__ = ("_client", "_kwargs", "_url")

    def __init__(self, url: str, kwargs: dict[str, Any]) -> None:
        self._url = url
        self._kwargs = kwargs
        self._client: Client | None = None

    async def _open(self) -> Client:
        parsed = parse_url(self._url)
        module_name = f"streamwire.{parsed.protocol}"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            raise ConfigurationError(
                f"{parsed.scheme}:// is not supported by this version of streamwire yet"
            ) from None
        connect_fn = getattr(module, "connect", None)
        if connect_fn is None:
            raise ConfigurationError(
                f"{parsed.scheme}:// is not supported by this version of streamwire yet"
            )
        client: Client = await connect_fn(self._url, **self._kwargs)
        return client

    def __await__(self) -> Generator[Any, None, Client]:
        return self._open().__await__()

    async def __aenter__(self) -> Client:
        self._client = await self._open()
        return self._client

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def connect(url: str, **options: Any) -> ConnectHandle:
    """Connect to the broker named by ``url`` (``rabbitmq-stream://``, ``liftbridge://``,
    ``iggy://`` and their ``+tls`` forms). Options go to the protocol's ``connect``; every
    protocol accepts ``timeout=`` (seconds, one budget for TCP, TLS, handshake and
    authentication).

    Usage: ``client = await streamwire.connect(url)`` or
    ``async with streamwire.connect(url) as client: ...``.
    """
    parse_url(url)  # fail fast, before anything is awaited
    return ConnectHandle(url, options)
