"""Fault scenarios' helpers: the fault-injecting TCP proxy (loopback only), and more.

``FaultProxy`` is the harness's (``integration/harness/faultproxy.py``: cuts clean and
dirty, black holes, refusals, latency, bandwidth), re-exported for the tests that import it
from here.

Also here, for fault scenarios: :func:`wait_until` (a condition, within a time limit),
:func:`proxied` (a URL with its address replaced by a proxy's) and :class:`LeakCheck` (no
task or socket left behind after close).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit, urlunsplit

from integration.harness.faultproxy import FaultProxy
from tests.holders import describe_grpc_holders
from tests.sockets import describe_sockets, open_sockets

__all__ = ("FaultProxy", "LeakCheck", "proxied", "wait_until")


def proxied(url: str, port: int) -> str:
    """``url`` with its address replaced by a proxy's on 127.0.0.1:``port`` (the user
    name, password, path and query kept)."""
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    netloc = f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


async def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, *, step: float = 0.02
) -> None:
    """Poll ``condition`` every ``step`` seconds (0: at every turn of the event loop); fail
    the test with ``what`` if it is still false after ``timeout`` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                if condition():
                    return
                await asyncio.sleep(step)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None


class LeakCheck:
    """What runs and what is open now, to compare with after a scenario.

    Create it when the scenario's fixtures are up; after closing the clients under test,
    ``await check.verify()`` waits (bounded) until every asyncio task and every socket created
    since is gone, and fails naming what is left.
    """

    def __init__(self) -> None:
        self._tasks = set(asyncio.all_tasks())
        self._sockets = open_sockets()

    def leftovers(
        self, expected: frozenset[str] = frozenset()
    ) -> tuple[list[asyncio.Task[object]], list[str]]:
        current = asyncio.current_task()
        tasks = [
            t
            for t in asyncio.all_tasks()
            if t not in self._tasks and t is not current and not t.done()
        ]
        sockets = sorted(open_sockets() - self._sockets - expected)
        return tasks, sockets

    async def verify(self, timeout: float = 5.0, *, expected: Iterable[int] = ()) -> None:
        """``expected``: descriptors of sockets that may be new (e.g. a server listening
        again after a restart)."""
        known: set[str] = set()
        for fd in expected:
            with contextlib.suppress(OSError):
                known.add(os.readlink(f"/proc/self/fd/{fd}"))
        allowed = frozenset(known)
        try:
            await wait_until(lambda: not any(self.leftovers(allowed)), timeout, "")
        except AssertionError:
            tasks, sockets = self.leftovers(allowed)
            described = describe_sockets(sockets)
            holders = describe_grpc_holders() if sockets else ""
            gc.collect()
            freed = sorted(set(sockets) - open_sockets())
            raise AssertionError(
                f"left {timeout} s after close: tasks {tasks}, sockets {described}"
                + (f"\ngrpc.aio objects not freed:\n{holders}" if holders else "")
                + (f"\nclosed by gc.collect() (a cycle held them): {freed}" if freed else "")
            ) from None
