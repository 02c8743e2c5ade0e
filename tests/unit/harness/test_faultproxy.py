"""The harness's fault proxy against a loopback server: what a clean cut, a dirty cut (bytes
the client wrote and never delivered), a cut at a byte mark, a black hole, a delay and packet
loss (iptables: root) do, on the test's loop and on a thread of its own."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time

import pytest

from integration.harness import partition
from integration.harness.faultproxy import FaultProxy, ThreadedFaultProxy
from tests.brokers import skip_missing
from tests.proxy import wait_until


class _Server:
    """A loopback server that reads everything, ``chunk`` bytes at a time, and hands each
    read to :meth:`got`."""

    chunk = 65536

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    def got(self, data: bytes) -> None:
        raise NotImplementedError

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(self.chunk):
                self.got(data)
        except OSError:
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class _Counting(_Server):
    """A server that counts what it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.received = 0

    def got(self, data: bytes) -> None:
        self.received += len(data)


async def _reset_seen(reader: asyncio.StreamReader) -> bool:
    try:
        async with asyncio.timeout(5):
            return await reader.read(1) == b""
    except ConnectionResetError:
        return True


async def test_a_dirty_cut_drops_what_the_client_wrote_then_resets() -> None:
    upstream = _Counting()
    port = await upstream.start()
    try:
        async with FaultProxy("127.0.0.1", port) as proxy:
            reader, writer = await asyncio.open_connection(*proxy.address)
            writer.write(b"a" * 1000)
            await writer.drain()
            await wait_until(lambda: upstream.received == 1000, 5.0, "the first bytes arrive")
            assert proxy.cut(hold=0.3) == 1
            writer.write(b"b" * 500)  # accepted by the kernel, never delivered
            await writer.drain()
            await wait_until(lambda: proxy.dropped == 500, 5.0, "the proxy swallows them")
            assert await _reset_seen(reader)
            assert (upstream.received, proxy.bytes_up, proxy.cuts) == (1000, 1000, [1000])
            assert proxy.open_connections == 0
            writer.close()
    finally:
        await upstream.close()


async def test_cuts_at_byte_marks_happen_once_each_as_traffic_passes_them() -> None:
    upstream = _Counting()
    port = await upstream.start()
    try:
        async with FaultProxy("127.0.0.1", port) as proxy:
            proxy.cut_at(3000, 1500)
            for expected_cuts in (1, 2):
                reader, writer = await asyncio.open_connection(*proxy.address)
                try:
                    for _ in range(4):
                        writer.write(b"x" * 500)
                        await writer.drain()
                        await asyncio.sleep(0.05)
                except ConnectionResetError:
                    pass  # the cut, seen by a write
                else:
                    assert await _reset_seen(reader)
                assert len(proxy.cuts) == expected_cuts
                writer.close()
            assert proxy.cuts[0] >= 1500
            assert proxy.cuts[1] >= 3000
            # no mark left: a third connection is relayed whole
            reader, writer = await asyncio.open_connection(*proxy.address)
            before = upstream.received
            writer.write(b"y" * 4000)
            await writer.drain()
            await wait_until(lambda: upstream.received == before + 4000, 5.0, "relayed whole")
            assert len(proxy.cuts) == 2
            writer.close()
    finally:
        await upstream.close()


def test_the_threaded_proxy_serves_blocking_clients_and_cuts_on_command() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with ThreadedFaultProxy("127.0.0.1", port) as proxy:
            client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
            accepted, _ = server.accept()
            client.sendall(b"hello")
            accepted.settimeout(5)
            assert accepted.recv(16) == b"hello"
            proxy.blackhole(True)
            client.sendall(b"lost?")
            time.sleep(0.2)
            accepted.settimeout(0.2)
            with pytest.raises(TimeoutError):
                accepted.recv(16)  # a stall: nothing forwarded, nothing reset
            proxy.blackhole(False)
            accepted.settimeout(5)
            assert accepted.recv(16) == b"lost?"  # held, then forwarded once healed
            assert proxy.cut() == 1
            assert proxy.cuts == [10]
            client.settimeout(5)
            try:
                got = client.recv(1)
            except ConnectionResetError:
                got = b""
            assert got == b""  # reset (or closed): nothing more comes
            client.close()
            accepted.close()


class _Stamping(_Server):
    """A server that notes when each byte arrives (a byte per chunk the client writes)."""

    chunk = 1

    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[tuple[bytes, float]] = []

    def got(self, data: bytes) -> None:
        self.arrivals.append((data, time.monotonic()))


async def test_a_delay_holds_each_chunk_from_its_arrival_and_keeps_the_order() -> None:
    upstream = _Stamping()
    port = await upstream.start()
    try:
        async with FaultProxy("127.0.0.1", port) as proxy:
            proxy.delay = 0.3
            _, writer = await asyncio.open_connection(*proxy.address)
            sent: list[float] = []
            for byte in b"abcde":
                sent.append(time.monotonic())
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.02)
            await wait_until(lambda: len(upstream.arrivals) == 5, 10.0, "every chunk")
            assert b"".join(b for b, _ in upstream.arrivals) == b"abcde"
            for at, (_, arrived) in zip(sent, upstream.arrivals, strict=True):
                assert arrived - at >= 0.3  # never sooner than the delay
            proxy.delay = 0.0  # healed: what follows goes straight through, still in order
            writer.write(b"f")
            await writer.drain()
            await wait_until(lambda: len(upstream.arrivals) == 6, 5.0, "the next chunk")
            assert upstream.arrivals[-1][0] == b"f"
            writer.close()
    finally:
        await upstream.close()


def _drops(chain: str) -> int:
    """Packets the loss chain's rules dropped so far."""
    listing = subprocess.run(
        ["iptables", "-w", "10", "-n", "-v", "-x", "-L", chain],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sum(int(line.split()[0]) for line in listing.splitlines() if "DROP" in line)


async def test_loss_drops_packets_in_the_kernel_and_tcp_still_delivers_every_byte() -> None:
    if os.geteuid() != 0 or shutil.which("iptables") is None:
        skip_missing("packet loss needs root and iptables")
    upstream = _Counting()
    port = await upstream.start()
    try:
        async with FaultProxy("127.0.0.1", port) as proxy:
            proxy.set_loss(0.3)
            chain = f"STREAMWIRE-LOSS-{proxy.port}"
            _, writer = await asyncio.open_connection(*proxy.address)
            for _ in range(40):  # small writes: many packets, some of them lost
                writer.write(b"z" * 100)
                await writer.drain()
                await asyncio.sleep(0.005)
            await wait_until(lambda: upstream.received == 4000, 60.0, "every byte, resent")
            assert _drops(chain) > 0
            proxy.set_loss(0)
            assert partition.heal(chain=chain) is False  # gone with set_loss(0)
            writer.close()
    finally:
        await upstream.close()
