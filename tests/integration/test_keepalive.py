"""A black hole is noticed by the kernel: a peer in a network namespace of the test's own
(a veth pair on a free /30 of 10.213.0.0/16, made and removed by the test) stops answering
(a blackhole route for the client's address: no reset, no FIN, nothing), and a read on a streamwire
TCP stream fails by TCP keepalive (here with second-long timings) instead of hanging; with
keepalive off the same read is still waiting. The userspace fault proxy cannot show this:
it answers TCP itself."""

from __future__ import annotations

import asyncio
import ipaddress
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

PORT = 15099
#: Namespaces and veth ends are named PREFIX + the pid of the pytest that made them.
PREFIX = "swka"
FAST = TcpKeepalive(idle=1, interval=1, count=2, user_timeout=4)

#: A server that accepts, says hello, and then keeps the connection open saying nothing.
SERVER_CODE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8)
print("ready", flush=True)
conns = []
while True:
    c, _ = s.accept(); c.sendall(b"hello"); conns.append(c)
"""


def ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30, text=True)
    return done.stdout


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_leftovers() -> None:
    """Remove the namespaces and veth ends of an earlier run that was killed before its
    cleanup (SIGKILL, a timeout's os._exit): their routes would catch this run's packets."""
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        pid = name.removeprefix(PREFIX)
        if name.startswith(PREFIX) and pid.isdigit() and not alive(int(pid)):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)
    for line in ip("-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        pid = name.removeprefix(PREFIX).removesuffix("a")
        if name.startswith(PREFIX) and pid.isdigit() and not alive(int(pid)):
            subprocess.run(["ip", "link", "delete", name], capture_output=True, timeout=30)


def free_subnet() -> ipaddress.IPv4Network:
    """A /30 of 10.213.0.0/16 that no route of this host overlaps (tried from one the pid
    picks, so that two runs at once start apart)."""
    taken: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for line in ip("-4", "route", "show", "table", "all").splitlines():
        word = line.split()[0] if line.split() else ""
        if word in ("broadcast", "local", "unreachable", "blackhole", "prohibit"):
            word = line.split()[1]
        if word == "default":
            continue
        try:
            taken.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    subnets = list(ipaddress.IPv4Network("10.213.0.0/16").subnets(new_prefix=30))
    start = os.getpid() % len(subnets)
    for candidate in subnets[start:] + subnets[:start]:
        if not any(candidate.overlaps(net) for net in taken):
            return candidate
    raise AssertionError("no free /30 in 10.213.0.0/16 for the test's veth pair")


@pytest.fixture
def namespace() -> Iterator[tuple[str, str, str]]:
    """(namespace, the client's address, the server's address)"""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        skip_missing("network namespaces need root and iproute2 (ip)")
    sweep_leftovers()
    host_a, host_b = (str(a) for a in free_subnet().hosts())
    ns, near, far = (f"{PREFIX}{os.getpid()}{end}" for end in ("", "a", "b"))
    ip("netns", "add", ns)
    server = None
    try:
        ip("link", "add", near, "type", "veth", "peer", "name", far)
        ip("link", "set", far, "netns", ns)
        ip("addr", "add", f"{host_a}/30", "dev", near)
        ip("link", "set", near, "up")
        ip("-n", ns, "addr", "add", f"{host_b}/30", "dev", far)
        ip("-n", ns, "link", "set", far, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-c", SERVER_CODE, host_b, str(PORT)],
            stdout=subprocess.PIPE,
        )
        assert server.stdout is not None
        assert server.stdout.readline() == b"ready\n"
        yield ns, host_a, host_b
    finally:
        if server is not None:
            server.kill()
            server.wait(10)
            if server.stdout is not None:
                server.stdout.close()
        subprocess.run(["ip", "link", "delete", near], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=30)


async def test_a_black_holed_peer_fails_the_read_by_keepalive(
    namespace: tuple[str, str, str],
) -> None:
    ns, client, server = namespace
    stream = await open_tcp(server, PORT, timeout=10, keepalive=FAST)
    silent = await open_tcp(server, PORT, timeout=10, keepalive=None)
    try:
        assert await stream.read() == b"hello"
        assert await silent.read() == b"hello"
        ip("-n", ns, "route", "add", "blackhole", f"{client}/32")  # no answer leaves
        with pytest.raises((ConnectionClosed, ReadError)):
            async with asyncio.timeout(60):  # FAST notices after about 3 s
                await stream.read()
        # without keepalive the kernel has nothing to notice with: still waiting
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(silent.read(), 8)
    finally:
        stream.abort()
        silent.abort()
