"""This process's TCP connections, read from /proc: for "no socket left" checks.

``/proc/self/net/tcp`` lists every connection of the network namespace (other processes,
and the server side of an in-process test double, included); only the sockets this process
holds a descriptor for (``/proc/self/fd`` → ``socket:[inode]``) are counted, so a broker
shared with other test runs does not disturb the count.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

__all__ = ("HAS_PROC", "open_sockets", "tcp_connections_to", "wait_connections_to")

HAS_PROC = Path("/proc/self/net/tcp").exists()


def open_sockets() -> set[str]:
    """This process's open sockets (``socket:[inode]``); empty where /proc is missing."""
    found: set[str] = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.startswith("socket:"):
                    found.add(target)
    return found


def tcp_connections_to(port: int) -> list[str]:
    """This process's TCP sockets whose remote port is ``port`` (any state but LISTEN), as
    ``"local -> remote state"`` lines of /proc/self/net/tcp{,6}."""
    mine = {s.removeprefix("socket:[").removesuffix("]") for s in open_sockets()}
    found: list[str] = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            lines = Path(f"/proc/self/net/{table}").read_text().splitlines()[1:]
            for line in lines:
                fields = line.split()
                local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
                if inode in mine and state != "0A" and int(remote.rsplit(":", 1)[1], 16) == port:
                    found.append(f"{local} -> {remote} state {state}")
    return found


async def wait_connections_to(port: int, timeout: float = 5.0) -> list[str]:
    """:func:`tcp_connections_to` once it is empty, or what is still open after
    ``timeout`` seconds (a socket dropped by the client closes on a later loop turn)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while True:
                if not tcp_connections_to(port):
                    break
                await asyncio.sleep(0.02)
    return tcp_connections_to(port)
