"""open_tcp: connecting, and the ways connecting fails."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import socket
import ssl
from collections.abc import Iterator

import pytest

from streamwire.errors import ConfigurationError, ConnectError, ConnectTimeout
from streamwire.transport import TLSOptions, open_tcp

from .helpers import ServerFactory, unused_port

# --- connecting ------------------------------------------------------------------------


async def test_connect_refused_is_connect_error() -> None:
    port = unused_port()
    with pytest.raises(ConnectError) as info:
        await open_tcp("127.0.0.1", port, timeout=5.0)
    assert f"127.0.0.1:{port}" in str(info.value)
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


async def test_dns_failure_is_connect_error() -> None:
    with pytest.raises(ConnectError) as info:
        await open_tcp("does-not-exist.invalid", 5552, timeout=10.0)
    assert "does-not-exist.invalid:5552" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)


async def test_invalid_read_size() -> None:
    with pytest.raises(ConfigurationError):
        await open_tcp("127.0.0.1", 1, timeout=1.0, read_size=0)


@contextlib.contextmanager
def full_backlog() -> Iterator[tuple[str, int]]:
    """A listening socket whose accept queue is full: new SYNs are dropped (Linux, BSD)."""
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket())
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        address = listener.getsockname()
        for _ in range(16):
            filler = stack.enter_context(socket.socket())
            filler.settimeout(0.2)
            try:
                filler.connect(address)
            except builtins.TimeoutError:
                break
        else:
            pytest.skip("the OS kept accepting connections; cannot build a black hole")
        yield address


async def test_connect_to_black_hole_times_out() -> None:
    with full_backlog() as (host, port):
        async with asyncio.timeout(10.0):  # hang guard only
            with pytest.raises(ConnectTimeout) as info:
                await open_tcp(host, port, timeout=0.05)
    assert isinstance(info.value, builtins.TimeoutError)
    assert f"{host}:{port}" in str(info.value)
    assert not isinstance(info.value, ConnectError)


async def test_tls_handshake_never_answered_times_out(start_server: ServerFactory) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # swallows the ClientHello and never answers

    server = await start_server(silent)
    async with asyncio.timeout(10.0):  # hang guard only
        with pytest.raises(ConnectTimeout):
            await open_tcp(server.host, server.port, tls=TLSOptions(), timeout=0.1)


async def test_connect_cancellation_propagates(start_server: ServerFactory) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    server = await start_server(silent)
    task = asyncio.create_task(open_tcp(server.host, server.port, tls=TLSOptions(), timeout=None))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_prebuilt_ssl_context_refused_is_connect_error() -> None:
    ctx = ssl.create_default_context()
    port = unused_port()
    with pytest.raises(ConnectError):
        await open_tcp("127.0.0.1", port, tls=ctx, timeout=5.0)
