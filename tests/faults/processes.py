"""The broker process a process fault (``pause``, ``kill``) acts on.

* :class:`HarnessProcess`: a broker ``integration/brokers.sh`` runs: SIGSTOP/SIGCONT and
  SIGKILL from this process, through the harness's own lookup of the broker's pids
  (``integration/harness/nemesis.py``), so that a signal lands the moment the nemesis says
  (a ``brokers.sh`` would take most of a second to start); a start on its data through
  ``brokers.sh fault revive``.
* :class:`DoubleProcess`: the Iggy conformance double as a process of its own
  (``python -m tests.iggy_double``), so that SIGSTOP pauses a whole server, sockets and all.
  Its log lives in memory, so it takes no SIGKILL: a crash is only tried on a real server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from integration.harness import lanes, nemesis
from integration.harness.config import Paths
from tests import brokers

__all__ = ("Crashable", "DoubleProcess", "HarnessProcess", "Pausable", "harness_context")


def harness_context() -> lanes.Context:
    """The harness's view of its brokers, as ``integration/brokers.sh`` run by the tests has
    it (the same state directory)."""
    env = {**os.environ, "STREAMWIRE_BROKERS_DIR": str(brokers.brokers_dir())}
    return lanes.Context(Paths.from_environ(brokers.REPO_ROOT, env), env)


class Pausable(Protocol):
    """A broker process the ``pause`` fault can stop and continue."""

    async def pause(self) -> None: ...

    async def resume(self) -> None: ...


@runtime_checkable
class Crashable(Pausable, Protocol):
    """One the ``kill`` fault can also crash and start again on its data."""

    async def kill(self) -> None: ...

    async def revive(self) -> None: ...


class HarnessProcess:
    """A broker of the harness (``rabbitmq``, ``liftbridge``, ``iggy``...)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._ctx = harness_context()

    async def _signal(self, verb: str) -> None:
        status = await asyncio.to_thread(nemesis.fault, self._ctx, verb, self.name)
        if status == 3:
            raise brokers.NotManaged(f"the harness runs no process of {self.name}")
        if status != 0:
            raise brokers.HarnessError(f"fault {verb} {self.name} exited {status}")

    async def pause(self) -> None:
        await self._signal("pause")

    async def resume(self) -> None:
        await self._signal("resume")

    async def kill(self) -> None:
        await self._signal("kill")

    async def revive(self) -> None:
        await brokers.fault("revive", self.name)


class DoubleProcess:
    """``async with DoubleProcess() as double:`` then connect to ``double.url``."""

    def __init__(self) -> None:
        self.address = self.url = ""
        self._process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Self:
        process = self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.iggy_double",
            stdout=asyncio.subprocess.PIPE,
            cwd=os.getcwd(),
        )
        assert process.stdout is not None
        try:
            line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        except BaseException:
            await self._end()
            raise
        if not line.startswith("listening on "):
            await self._end()
            raise RuntimeError(f"the double did not start: {line!r}")
        self.address = line.removeprefix("listening on ").strip()
        self.url = f"iggy://iggy:iggy@{self.address}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._end()

    async def _end(self) -> None:
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGCONT)  # a paused process would not act on SIGTERM
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()

    def _signal(self, sig: signal.Signals) -> None:
        assert self._process is not None
        self._process.send_signal(sig)

    async def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    async def resume(self) -> None:
        self._signal(signal.SIGCONT)
