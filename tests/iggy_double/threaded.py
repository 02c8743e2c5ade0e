"""The conformance double on its own event loop in a background thread.

For tests whose Iggy clients live elsewhere: in other threads with their own loops, or in
other processes (Spark's Python workers), which reach it over loopback TCP::

    with ThreadedIggyDouble() as server:
        run_something_against(server.url)

The double itself is an asyncio object of that loop: look at its state only through
:meth:`ThreadedIggyDouble.call`, which runs a function there.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar

from streamwire import SyncBridge
from tests.iggy_double.server import IggyDouble

__all__ = ("ThreadedIggyDouble",)

T = TypeVar("T")


class ThreadedIggyDouble:
    """An :class:`IggyDouble` (constructor options passed through) serving on a loopback
    ephemeral port from a daemon thread running its own event loop."""

    def __init__(self, *, timeout: float = 10.0, **options: Any) -> None:
        self.timeout = timeout
        self._options = options
        self._bridge = SyncBridge(name="iggy-double")
        self._double: IggyDouble | None = None

    def start(self) -> Self:
        """Start the loop thread and the server; returns once it accepts connections."""

        async def start() -> IggyDouble:
            return await IggyDouble(**self._options).start()

        try:
            self._double = self._bridge.run(start, timeout=self.timeout)
        except BaseException:
            self._bridge.close()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (closing every connection), then the loop thread. Idempotent."""
        double, self._double = self._double, None
        try:
            if double is not None:
                self._bridge.run(double.stop, timeout=self.timeout)
        finally:
            self._bridge.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def double(self) -> IggyDouble:
        if self._double is None:
            raise RuntimeError("the threaded Iggy double is not running")
        return self._double

    @property
    def host(self) -> str:
        return self.double.host

    @property
    def port(self) -> int:
        return self.double.port

    @property
    def url(self) -> str:
        return self.double.url

    def call(self, func: Callable[[IggyDouble], T]) -> T:
        """``func(double)`` run on the double's loop (to read or change its state safely)."""
        double = self.double

        async def run() -> T:
            return func(double)

        return self._bridge.run(run, timeout=self.timeout)
