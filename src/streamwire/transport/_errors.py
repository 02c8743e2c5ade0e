"""Translate foreign I/O exceptions into the streamwire hierarchy, at the transport boundary.

:func:`map_errors` is a plain (synchronous) context manager, so it works around ``await``
expressions as well::

    with map_errors("read", target="broker:5552"):
        data = await reader.read(65536)

Only :class:`Exception` subclasses are ever caught: ``CancelledError``, ``KeyboardInterrupt``
and other ``BaseException`` subclasses always pass through untouched. streamwire's own
exceptions pass through too (``streamwire.TimeoutError`` is an ``OSError`` by inheritance,
and must not become a ``ConnectError``). A bare ``TimeoutError`` without ``errno`` is the one
raised by ``asyncio.timeout()``; it is left alone so that the enclosing timeout scope can
convert it (see :mod:`streamwire.transport.deadline`).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from types import TracebackType
from typing import Final, Literal, TypeAlias

from streamwire.errors import (
    ConnectError,
    ConnectionClosed,
    ConnectTimeout,
    ReadError,
    StreamwireError,
    WriteError,
)

__all__ = ("ErrorMap", "Operation", "map_errors")

#: Which step was running: decides the streamwire class a foreign error becomes.
Operation: TypeAlias = Literal["connect", "read", "write"]

#: Foreign exception type -> streamwire exception type. Checked in order; first match wins.
ErrorMap: TypeAlias = Mapping[type[Exception], type[StreamwireError]]

# The peer went away (reset, broken pipe, EOF in the middle of something, TLS closed).
_GONE: Final[tuple[type[Exception], ...]] = (
    asyncio.IncompleteReadError,
    EOFError,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    ssl.SSLZeroReturnError,
    ssl.SSLEOFError,
)

_MAPS: Final[dict[Operation, ErrorMap]] = {
    "connect": {
        TimeoutError: ConnectTimeout,  # the OS gave up (ETIMEDOUT); errno-less ones are skipped
        OSError: ConnectError,  # includes ssl.SSLError, socket.gaierror, ConnectionError
        EOFError: ConnectError,
        asyncio.IncompleteReadError: ConnectError,
    },
    "read": {**dict.fromkeys(_GONE, ConnectionClosed), OSError: ReadError},
    "write": {**dict.fromkeys(_GONE, ConnectionClosed), OSError: WriteError},
}

_VERBS: Final[dict[Operation, str]] = {
    "connect": "connect to",
    "read": "read from",
    "write": "write to",
}


def _describe(exc: BaseException) -> str:
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


class map_errors:
    """Context manager that re-raises foreign I/O errors as streamwire errors, chained.

    ``operation`` picks the built-in table: ``"connect"`` turns everything into
    :class:`~streamwire.errors.ConnectError` (or :class:`~streamwire.errors.ConnectTimeout`
    for an OS-level ``ETIMEDOUT``); ``"read"`` and ``"write"`` turn a vanished peer (reset,
    broken pipe, premature EOF, TLS close) into :class:`~streamwire.errors.ConnectionClosed`
    and any other ``OSError``/``ssl.SSLError`` into :class:`~streamwire.errors.ReadError` or
    :class:`~streamwire.errors.WriteError`. ``mapping`` replaces the table. ``target`` (for
    example ``"host:port"``) goes into the message. The original is kept as ``__cause__``.

    Instances are stateless and reusable, also concurrently.
    """

    __slots__ = ("_mapping", "_prefix", "_target")

    def __init__(
        self,
        operation: Operation = "read",
        *,
        target: str | None = None,
        mapping: ErrorMap | None = None,
    ) -> None:
        self._mapping: ErrorMap = mapping if mapping is not None else _MAPS[operation]
        verb = _VERBS[operation]
        self._prefix = f"{verb} {target}" if target else verb.split(" ")[0]
        self._target = target

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, StreamwireError):
            return  # nothing raised, a BaseException (CancelledError...), or already ours
        if type(exc) is TimeoutError and exc.errno is None:
            return  # asyncio.timeout()'s exception: the enclosing scope converts it
        for foreign, ours in self._mapping.items():
            if isinstance(exc, foreign):
                if issubclass(ours, ConnectionClosed):
                    peer = f" to {self._target}" if self._target else ""
                    raise ours(f"connection{peer} lost: {_describe(exc)}") from exc
                raise ours(f"{self._prefix} failed: {_describe(exc)}") from exc
        return
