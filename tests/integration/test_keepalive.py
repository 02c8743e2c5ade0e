"""A black hole is noticed by the kernel: a peer in a network namespace of the test's own
(a veth pair on 10.213.7.0/30, made and removed by the test) stops answering (a blackhole
route for the client's address: no reset, no FIN, nothing), and a read on a streamwire
TCP stream fails by TCP keepalive (here with second-long timings) instead of hanging; with
keepalive off the same read is still waiting. The userspace fault proxy cannot show this:
it answers TCP itself."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from streamwire.errors import ConnectionClosed, ReadError
from streamwire.transport.tcp import TcpKeepalive, open_tcp
from tests.brokers import skip_missing

pytestmark = [pytest.mark.integration, pytest.mark.one_core, pytest.mark.timeout(120)]

CLIENT, SERVER, PORT = "10.213.7.1", "10.213.7.2", 15099
FAST = TcpKeepalive(idle=1, interval=1, count=2, user_timeout=4)

#: A server that accepts, says hello, and then keeps the connection open saying nothing.
SERVER_CODE = f"""
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{SERVER}", {PORT})); s.listen(8)
print("ready", flush=True)
conns = []
while True:
    c, _ = s.accept(); c.sendall(b"hello"); conns.append(c)
"""


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def namespace() -> Iterator[str]:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        skip_missing("network namespaces need root and iproute2 (ip)")
    ns, near, far = f"swka{os.getpid()}", f"swka{os.getpid()}a", f"swka{os.getpid()}b"
    ip("netns", "add", ns)
    server = None
    try:
        ip("link", "add", near, "type", "veth", "peer", "name", far)
        ip("link", "set", far, "netns", ns)
        ip("addr", "add", f"{CLIENT}/30", "dev", near)
        ip("link", "set", near, "up")
        ip("-n", ns, "addr", "add", f"{SERVER}/30", "dev", far)
        ip("-n", ns, "link", "set", far, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-c", SERVER_CODE],
            stdout=subprocess.PIPE,
        )
        assert server.stdout is not None
        assert server.stdout.readline() == b"ready\n"
        yield ns
    finally:
        if server is not None:
            server.kill()
            server.wait(10)
            if server.stdout is not None:
                server.stdout.close()
        subprocess.run(["ip", "link", "delete", near], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=30)


async def test_a_black_holed_peer_fails_the_read_by_keepalive(namespace: str) -> None:
    stream = await open_tcp(SERVER, PORT, timeout=10, keepalive=FAST)
    silent = await open_tcp(SERVER, PORT, timeout=10, keepalive=None)
    try:
        assert await stream.read() == b"hello"
        assert await silent.read() == b"hello"
        ip("-n", namespace, "route", "add", "blackhole", f"{CLIENT}/32")  # no answer leaves
        with pytest.raises((ConnectionClosed, ReadError)):
            async with asyncio.timeout(60):  # FAST notices after about 3 s
                await stream.read()
        # without keepalive the kernel has nothing to notice with: still waiting
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(silent.read(), 8)
    finally:
        stream.abort()
        silent.abort()
