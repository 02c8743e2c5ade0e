"""``streamwire.connect(url)``: dispatch on the URL scheme to the protocol package."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import ModuleType, TracebackType
from typing import Any, Unpack

from streamwire._api import Client, ConnectKwargs
from streamwire._options import accepted_keywords, check_connect_values, check_names
from streamwire._url import BrokerURL, check_query, parse_url
from streamwire.errors import ConfigurationError

__all__ = ("Client", "ConnectHandle", "connect")


class ConnectHandle:
    """Returned by :func:`connect`: ``await`` it for a client, or use it with ``async with``
    (the client is closed on exit)."""

    __slots__ = ("_client", "_connect", "_kwargs", "_url")

    def __init__(self, url: str, kwargs: Mapping[str, object]) -> None:
        self._url = url
        self._kwargs = dict(kwargs)
        self._client: Client | None = None
        parsed = parse_url(url)
        check_query(parsed)
        self._connect = _protocol_connect(parsed)
        check_names(self._kwargs, accepted_keywords(self._connect) - {"url"}, "connect")
        check_connect_values(self._kwargs)

    async def _open(self) -> Client:
        client: Client = await self._connect(self._url, **self._kwargs)
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


def _protocol_connect(parsed: BrokerURL) -> Callable[..., Awaitable[Client]]:
    module_name = f"streamwire.{parsed.protocol}"
    unsupported = f"{parsed.scheme}:// is not supported by this version of streamwire yet"
    try:
        module: ModuleType = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise ConfigurationError(unsupported) from None
    connect_fn: Callable[..., Awaitable[Client]] | None = getattr(module, "connect", None)
    if connect_fn is None:
        raise ConfigurationError(unsupported)
    return connect_fn


def connect(url: str, **options: Unpack[ConnectKwargs]) -> ConnectHandle:
    """Connect to the broker named by ``url`` (``rabbitmq-stream://``, ``liftbridge://``,
    ``iggy://`` and their ``+tls`` forms). Options go to the protocol's ``connect``: the
    ones every protocol takes are :class:`~streamwire.ConnectKwargs` (``timeout=``: seconds,
    one budget for TCP, TLS, handshake and authentication); a name the protocol's
    ``connect`` does not take raises :class:`ConfigurationError` naming the close matches,
    here, before anything is awaited (as does a bad URL).

    Usage: ``client = await streamwire.connect(url)`` or
    ``async with streamwire.connect(url) as client: ...``.
    """
    return ConnectHandle(url, options)
