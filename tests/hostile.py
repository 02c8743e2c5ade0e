"""A hostile TCP server on loopback for the malicious-server tests of every protocol: it plays
a script to each connection, then holds the line open saying nothing; meanwhile a ticker
proves the event loop is not blocked, and the client must let go of every task and socket
it made (while the server still holds its end, and again once the server is gone)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from tests.proxy import LeakCheck, wait_until

__all__ = ("Evil", "Script", "hostile_server", "released")

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Check = Callable[[LeakCheck, "Evil"], Awaitable[None]]


@dataclass
class Evil:
    port: int = 0
    connections: int = 0
    ticks: int = 0
    handlers: list[asyncio.Task[None]] = field(default_factory=list)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def server_side(self) -> set[str]:
        """The accepted sockets (``socket:[inode]``): the server's, not the client's."""
        found = set()
        for writer in self.writers:
            with contextlib.suppress(OSError, AttributeError):
                fd = writer.get_extra_info("socket").fileno()
                found.add(os.readlink(f"/proc/self/fd/{fd}"))
        return found


async def released(
    check: LeakCheck,
    state: Evil,
    *,
    allowed: Callable[[], set[str]] = set,
    counted: Callable[[list[str]], list[str]] = list,
) -> None:
    """Wait (bounded) until the client holds no task and no socket, the server's handlers and
    accepted sockets excepted, and ``allowed()`` too; ``counted`` picks the sockets that
    count (all by default)."""

    def leftovers() -> tuple[list[asyncio.Task[object]], list[str]]:
        tasks, sockets = check.leftovers(frozenset(state.server_side() | allowed()))
        return [t for t in tasks if t not in state.handlers], counted(sockets)

    try:
        await wait_until(lambda: not any(leftovers()), 3.0, "")
    except AssertionError:
        raise AssertionError(f"the client left {leftovers()} behind") from None


@contextlib.asynccontextmanager
async def hostile_server(
    script: Script, *, budget: float, while_open: Check, after: Check
) -> AsyncIterator[Evil]:
    """Serve ``script``; on exit run ``while_open`` (the server still holds its ends), tear
    the server down within ``budget`` seconds, then run ``after``."""
    state = Evil()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        state.writers.append(writer)
        task = asyncio.current_task()
        if task is not None:
            state.handlers.append(task)
        with contextlib.suppress(Exception):
            await script(reader, writer)
            async with asyncio.timeout(30):
                await state.stop.wait()
        writer.close()

    async def ticker() -> None:
        while True:
            await asyncio.sleep(0.01)
            state.ticks += 1

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    tick_task = asyncio.create_task(ticker())
    check = LeakCheck()
    try:
        yield state
        await asyncio.sleep(0.05)  # the loop still runs other tasks after the failure
        assert state.ticks > 0, "the event loop was blocked"
        await while_open(check, state)
    finally:
        tick_task.cancel()
        state.stop.set()
        for writer in state.writers:
            writer.transport.abort()
        async with asyncio.timeout(budget):
            await asyncio.gather(*state.handlers, tick_task, return_exceptions=True)
        server.close()
        await server.wait_closed()
    state.writers.clear()
    await after(check, state)
