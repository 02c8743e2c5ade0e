"""map_errors: foreign I/O exceptions become streamwire ones, chained."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl

import pytest

from streamwire.errors import (
    ConnectError,
    ConnectionClosed,
    ConnectTimeout,
    DecodeError,
    ReadError,
    StreamwireError,
    WriteError,
)
from streamwire.transport import Operation, map_errors

GONE: list[BaseException] = [
    ConnectionResetError(errno.ECONNRESET, "reset"),
    BrokenPipeError(errno.EPIPE, "broken pipe"),
    ConnectionAbortedError(),
    asyncio.IncompleteReadError(b"ab", 4),
    EOFError(),
    ssl.SSLZeroReturnError(),
    ssl.SSLEOFError(),
]


@pytest.mark.parametrize(
    ("operation", "raised", "expected"),
    [
        ("connect", ConnectionRefusedError(errno.ECONNREFUSED, "refused"), ConnectError),
        ("connect", socket.gaierror(-2, "Name or service not known"), ConnectError),
        ("connect", ssl.SSLCertVerificationError("bad cert"), ConnectError),
        ("connect", asyncio.IncompleteReadError(b"", 1), ConnectError),
        ("connect", OSError(errno.EHOSTUNREACH, "no route"), ConnectError),
        ("connect", TimeoutError(errno.ETIMEDOUT, "timed out"), ConnectTimeout),
        ("read", OSError(errno.EIO, "io"), ReadError),
        ("read", ssl.SSLError("bad record mac"), ReadError),
        ("write", OSError(errno.EIO, "io"), WriteError),
        ("write", ssl.SSLError("bad"), WriteError),
        *(("read", exc, ConnectionClosed) for exc in GONE),
        *(("write", exc, ConnectionClosed) for exc in GONE),
    ],
)
def test_translation(
    operation: Operation, raised: BaseException, expected: type[StreamwireError]
) -> None:
    with pytest.raises(expected) as info, map_errors(operation, target="broker:5552"):
        raise raised
    assert type(info.value) is expected
    assert info.value.__cause__ is raised
    assert "broker:5552" in str(info.value)


async def test_usable_around_awaits() -> None:
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ConnectionResetError(errno.ECONNRESET, "reset")

    with pytest.raises(ConnectionClosed) as info, map_errors("read"):
        await fails()
    assert isinstance(info.value.__cause__, ConnectionResetError)
    assert info.value.reason.startswith("connection lost")


@pytest.mark.parametrize("operation", ["connect", "read", "write"])
def test_passes_through_what_it_must_not_touch(operation: Operation) -> None:
    untouched: list[BaseException] = [
        asyncio.CancelledError(),
        KeyboardInterrupt(),
        ValueError("a bug, not I/O"),
        DecodeError("header", 3),
        ConnectTimeout("ours already"),  # also an OSError subclass, via TimeoutError
        TimeoutError(),  # asyncio.timeout()'s: the enclosing scope converts it
    ]
    for exc in untouched:
        with pytest.raises(type(exc)) as info, map_errors(operation):
            raise exc
        assert info.value is exc


def test_custom_mapping_and_no_error() -> None:
    with map_errors("read"):
        pass
    with pytest.raises(WriteError), map_errors("read", mapping={ValueError: WriteError}):
        raise ValueError("bad")
    with (
        pytest.raises(OSError, match="not in the mapping"),
        map_errors("read", mapping={ValueError: WriteError}),
    ):
        raise OSError("not in the mapping")


def test_instances_are_reusable() -> None:
    mapper = map_errors("write", target="x:1")
    for _ in range(2):
        with pytest.raises(WriteError), mapper:
            raise OSError(errno.EIO, "io")
