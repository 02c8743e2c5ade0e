"""What every asyncio task of a hung test waits on, printed shortly before pytest-timeout
fails it.

pytest-timeout prints the threads' stacks, but a hung asyncio test is one thread idling in
the selector: the stacks that matter are the tasks'. ``Task.print_stack`` shows a suspended
task's outermost coroutine frame only (a suspended frame has no ``f_back``), so
``format_tasks`` walks each task's await chain (``cr_await``, ``ag_await``, ``gi_yieldfrom``)
down to the coroutine that is suspended, and names the future the task waits on.

``arm(item, timeout)`` (called by ``tests/conftest.py`` for every test) starts a timer
thread that, ``margin(timeout)`` seconds before the timeout, signals the main thread; the
signal handler runs between two bytecodes of the main thread, where the event loop runs,
and writes the dump through pytest's terminal writer (with pytest-timeout's signal method
it shows in the failed test's captured stdout).
"""

from __future__ import annotations

import asyncio
import linecache
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

SIGNAL = signal.SIGUSR2


def margin(timeout: float) -> float:
    """How long before the timeout the dump is written: a tenth of it, at most 10 s."""
    return min(10.0, timeout / 10)


def _frame_line(frame: FrameType) -> str:
    code = frame.f_code
    line = linecache.getline(code.co_filename, frame.f_lineno).strip()
    return f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}\n    {line}'


def await_chain(awaitable: Any) -> tuple[list[FrameType], object]:
    """The frames of the suspended coroutines (async generators, generators) from
    ``awaitable`` down, and the object the innermost one waits on (``None``: nothing, e.g. a
    coroutine not started or finished)."""
    frames: list[FrameType] = []
    current: Any = awaitable
    for _ in range(1000):  # a bound, in case of a cycle
        frame = getattr(current, "cr_frame", None)
        frame = frame or getattr(current, "ag_frame", None) or getattr(current, "gi_frame", None)
        if frame is None:
            break
        frames.append(frame)
        inner = getattr(current, "cr_await", None)
        if inner is None:
            inner = getattr(current, "ag_await", None)
        if inner is None:
            inner = getattr(current, "gi_yieldfrom", None)
        if inner is None:
            return frames, None
        current = inner
    return frames, current


def format_task(task: asyncio.Task[Any]) -> str:
    lines = [repr(task)]
    if not task.done():
        frames, innermost = await_chain(task.get_coro())
        lines += [_frame_line(frame) for frame in frames]
        if innermost is not None and not frames:
            lines.append(f"  awaits {innermost!r}")
        # the future the task's last step suspended on (Task's repr says wait_for= too,
        # without the future's own callbacks when it is a Task)
        waiter = getattr(task, "_fut_waiter", None)
        if waiter is not None:
            lines.append(f"  waits for {waiter!r}")
    return "\n".join(lines)


def format_tasks(loop: asyncio.AbstractEventLoop) -> str:
    """Every task of ``loop`` with its await chain, the current one (if any) marked."""
    current = asyncio.current_task(loop)
    tasks = sorted(asyncio.all_tasks(loop), key=lambda t: t.get_name())
    parts = [f"{len(tasks)} unfinished asyncio tasks"]
    for task in tasks:
        mark = " (running now)" if task is current else ""
        parts.append(f"--- task {task.get_name()}{mark}\n{format_task(task)}")
    return "\n".join(parts)


def _dump(write: Callable[[str], None]) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        write("no event loop runs in the main thread now (a synchronous wait?)\n")
        return
    write(format_tasks(loop) + "\n")


def arm(item: pytest.Item, timeout: float) -> Callable[[], None]:
    """Dump the tasks ``margin(timeout)`` s before ``timeout``; returns the disarm call."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    terminal = item.config.get_terminal_writer()

    def handler(signum: int, frame: FrameType | None) -> None:
        terminal.sep("+", title=f"asyncio tasks of {item.nodeid} (the timeout is near)")
        _dump(terminal.write)
        terminal.sep("+", title="asyncio tasks end")
        terminal.flush()

    main = threading.main_thread().ident
    assert main is not None
    previous = signal.signal(SIGNAL, handler)
    timer = threading.Timer(timeout - margin(timeout), signal.pthread_kill, (main, SIGNAL))
    timer.name = f"streamwire task dump {item.nodeid}"
    timer.daemon = True
    timer.start()

    def disarm() -> None:
        timer.cancel()
        timer.join(5)
        signal.signal(SIGNAL, previous)

    return disarm


def item_timeout(item: pytest.Item) -> float | None:
    """The test's pytest-timeout: its ``timeout`` marker, else ``--timeout``, else the ini."""
    marker = item.get_closest_marker("timeout")
    value: object = None
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
    if value is None:
        value = item.config.getoption("timeout", None) or item.config.getini("timeout")
    try:
        timeout = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return timeout if timeout > 0 else None
