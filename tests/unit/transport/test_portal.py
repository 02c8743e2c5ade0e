"""SyncBridge: the blocking façade, used from plain threads (no event loop in the test)."""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import threading

import pytest

from streamwire.errors import ClientStateError, ClosedError, StreamwireError, TimeoutError
from streamwire.transport import SyncBridge, open_tcp


async def add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


async def loop_thread_name() -> str:
    asyncio.get_running_loop()  # proves we run inside a loop
    return threading.current_thread().name


async def fail() -> None:
    raise ValueError("from the coroutine")


def test_call_and_run_from_the_main_thread() -> None:
    with SyncBridge(name="test-bridge") as bridge:
        assert bridge.call(add, 2, 3) == 5
        assert bridge.run(lambda: add(4, 5)) == 9
        assert bridge.call(loop_thread_name) == "test-bridge"
        with pytest.raises(ValueError, match="from the coroutine"):
            bridge.call(fail)
        assert "running" in repr(bridge)
    assert bridge.closed


def test_calls_from_several_plain_threads() -> None:
    results: dict[int, int] = {}
    errors: list[BaseException] = []
    with SyncBridge() as bridge:

        def worker(i: int) -> None:
            try:
                results[i] = bridge.call(add, i, 100)
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert not errors
    assert results == {i: i + 100 for i in range(8)}


def test_lazy_start_and_idempotent_close() -> None:
    bridge = SyncBridge()
    assert "idle" in repr(bridge)
    assert bridge.call(add, 1, 1) == 2
    bridge.close()
    bridge.close()
    assert "closed" in repr(bridge)


def test_calls_after_close_raise_client_state_error() -> None:
    bridge = SyncBridge().start()
    bridge.close()
    with pytest.raises(ClientStateError, match="closed"):
        bridge.call(add, 1, 2)
    with pytest.raises(ClosedError):
        bridge.run(lambda: add(1, 2))
    with pytest.raises(ClosedError):
        bridge.start()
    never_started = SyncBridge()
    never_started.close()
    with pytest.raises(ClosedError):
        never_started.call(add, 1, 2)


def test_timeout_cancels_the_call() -> None:
    cancelled = threading.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with SyncBridge() as bridge:
        with pytest.raises(TimeoutError):
            bridge.call(slow, timeout=0.05)
        assert cancelled.wait(5)
        assert bridge.call(add, 1, 2) == 3  # still usable


def test_close_cancels_running_calls() -> None:
    bridge = SyncBridge().start()
    started = threading.Event()
    outcome: list[BaseException] = []

    async def forever() -> None:
        started.set()
        await asyncio.sleep(3600)

    def caller() -> None:
        try:
            bridge.call(forever)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=caller)
    thread.start()
    assert started.wait(5)
    bridge.close()
    thread.join(5)
    assert len(outcome) == 1
    assert isinstance(outcome[0], ClosedError)


def test_calling_from_the_loop_thread_is_refused() -> None:
    with SyncBridge() as bridge:

        async def reenter() -> int:
            return bridge.call(add, 1, 1)

        with pytest.raises(ClientStateError, match="own event loop"):
            bridge.call(reenter)


def test_network_io_through_the_bridge() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readexactly(4))
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def round_trip() -> bytes:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with await open_tcp("127.0.0.1", port, timeout=5.0) as stream:
                await stream.send(b"ping")
                return await stream.read_exactly(4, timeout=5.0)
        finally:
            server.close()
            await server.wait_closed()

    with SyncBridge() as bridge:
        assert bridge.run(round_trip, timeout=10.0) == b"ping"


def test_a_builtin_timeout_raised_inside_the_call_comes_out_as_a_streamwire_one() -> None:
    """asyncio.timeout (or a library) inside the coroutine raises the builtin TimeoutError;
    callers catch StreamwireError (the Spark source's consumerName store did, and the
    builtin escaped it): it comes out as streamwire's TimeoutError, the cause kept."""

    async def times_out() -> None:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(5)

    async def raises_ours() -> None:
        raise TimeoutError("ours")

    with SyncBridge() as bridge:
        for timeout in (None, 5.0):
            with pytest.raises(StreamwireError) as caught:
                bridge.call(times_out, timeout=timeout)
            assert isinstance(caught.value, TimeoutError)
            assert type(caught.value.__cause__) is builtins.TimeoutError
            with pytest.raises(TimeoutError, match="ours") as ours:
                bridge.call(raises_ours, timeout=timeout)
            assert ours.value.__cause__ is None


def test_a_call_that_ends_as_its_wait_expires_gives_its_own_outcome() -> None:
    """The wait for the result timing out while the call completes: its result (or its
    error), not a timeout."""
    bridge = SyncBridge()
    done: concurrent.futures.Future[int] = concurrent.futures.Future()
    done.set_result(7)
    failed: concurrent.futures.Future[int] = concurrent.futures.Future()
    failed.set_exception(ValueError("its own"))
    assert bridge._result(_LateFuture(done), 0.01) == 7
    with pytest.raises(ValueError, match="its own"):
        bridge._result(_LateFuture(failed), 0.01)


class _LateFuture(concurrent.futures.Future[int]):
    """A future whose first wait times out although it is done (the race, made certain)."""

    def __init__(self, inner: concurrent.futures.Future[int]) -> None:
        super().__init__()
        self._inner, self._waited = inner, False

    def result(self, timeout: float | None = None) -> int:
        if not self._waited:
            self._waited = True
            raise builtins.TimeoutError
        return self._inner.result(timeout)

    def done(self) -> bool:
        return True

    def cancelled(self) -> bool:
        return False

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._inner.exception(timeout)
