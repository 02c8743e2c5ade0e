"""This process's TCP connections, read from /proc: for "no socket left" checks.

``/proc/self/net/tcp`` lists every connection of the network namespace (other processes,
and the server side of an in-process test double, included); only the sockets this process
holds a descriptor for (``/proc/self/fd`` → ``socket:[inode]``) are counted, so a broker
shared with other test runs does not disturb the count.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
from pathlib import Path

__all__ = (
    "HAS_PROC",
    "describe_sockets",
    "open_sockets",
    "tcp_connections_to",
    "wait_connections_to",
)

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


def _endpoint(hex_address: str) -> str:
    """An address of /proc/net/tcp{,6} (32-bit words in host byte order, little-endian
    here) as ``host:port``."""
    address, port = hex_address.rsplit(":", 1)
    raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, len(address), 8))
    ip = ipaddress.ip_address(raw)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return f"[{ip}]:{int(port, 16)}"
    return f"{ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else ip}:{int(port, 16)}"


def describe_sockets(sockets: list[str]) -> list[str]:
    """``socket:[inode]`` names as ``"tcp local -> remote state XX"`` (or the protocol table
    that lists them: ``udp``, ``unix``...), for a failure message that says what was left."""
    names = {s.removeprefix("socket:[").removesuffix("]"): s for s in sockets}
    described: dict[str, str] = {}
    for table in ("tcp", "tcp6", "udp", "udp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/self/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in names:
                    described[fields[9]] = (
                        f"{names[fields[9]]} {table} {_endpoint(fields[1])} -> "
                        f"{_endpoint(fields[2])} state {fields[3]}"
                    )
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/net/unix").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 6 and fields[6] in names:
                described.setdefault(fields[6], f"{names[fields[6]]} unix {' '.join(fields[7:])}")
    return [described.get(inode, name) for inode, name in names.items()]


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
