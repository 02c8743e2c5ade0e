"""The unified API every protocol client offers (docs/api.md), as typing protocols.

``streamwire.connect(url)`` returns a :class:`Client`; its producers and consumers follow
:class:`Producer` and :class:`Consumer`. Protocol packages implement them structurally and add
their own richer options.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from types import TracebackType
from typing import Any, Protocol, Self

from streamwire.codec.headers import HeaderInput
from streamwire.codec.message import Confirmation, Message
from streamwire.codec.offset import OffsetLike

__all__ = ("Client", "Consumer", "Producer")


class _AsyncResource(Protocol):
    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class Producer(_AsyncResource, Protocol):
    async def send(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
    ) -> asyncio.Future[Confirmation]: ...

    async def send_and_wait(
        self,
        value: bytes | Message,
        *,
        key: bytes | None = None,
        headers: Mapping[str, HeaderInput] | None = None,
    ) -> Confirmation: ...

    async def send_batch(
        self, values: Iterable[bytes | Message]
    ) -> list[asyncio.Future[Confirmation]]: ...

    async def flush(self, timeout: float | None = None) -> None: ...

    async def close(self) -> None: ...


class Consumer(_AsyncResource, Protocol):
    def __aiter__(self) -> AsyncIterator[Message]: ...

    async def next_batch(
        self, max_messages: int = 500, timeout: float | None = 1.0
    ) -> list[Message]: ...

    async def commit(self, offset: int | None = None) -> None: ...

    async def close(self) -> None: ...


class Client(_AsyncResource, Protocol):
    async def create_stream(
        self, name: str, *, partitions: int = 1, exist_ok: bool = False, **options: Any
    ) -> None: ...

    async def delete_stream(self, name: str, *, missing_ok: bool = False) -> None: ...

    def producer(self, stream: str, *, name: str | None = None, **options: Any) -> Producer: ...

    def consumer(
        self,
        stream: str,
        *,
        offset: OffsetLike = "first",
        name: str | None = None,
        **options: Any,
    ) -> Consumer: ...

    async def close(self) -> None: ...
