"""Fixtures for the transport tests: throwaway local servers and a throwaway TLS CA."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest
import trustme

from .helpers import Handler, LocalServer, ServerFactory, echo


@pytest.fixture
async def start_server() -> AsyncIterator[ServerFactory]:
    """``await start_server(handler, ssl_context=None)`` -> a running :class:`LocalServer`."""
    servers: list[LocalServer] = []

    async def start(handler: Handler, *, ssl_context: ssl.SSLContext | None = None) -> LocalServer:
        server = await LocalServer(handler, ssl_context=ssl_context).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.aclose()


@pytest.fixture
async def echo_server(start_server: ServerFactory) -> LocalServer:
    return await start_server(echo)


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="session")
def server_ssl_context(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(ctx)
    return ctx
