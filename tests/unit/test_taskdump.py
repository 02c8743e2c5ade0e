"""tests/taskdump.py: what a hung test's asyncio tasks wait on, printed before its timeout."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests import taskdump


async def _innermost(event: asyncio.Event) -> None:
    await event.wait()


async def _middle(event: asyncio.Event) -> None:
    await _innermost(event)


async def test_each_task_is_shown_with_its_whole_await_chain() -> None:
    event = asyncio.Event()
    helper = asyncio.create_task(_middle(event), name="helper")
    await asyncio.sleep(0)  # the helper runs up to its wait
    text = taskdump.format_tasks(asyncio.get_running_loop())
    helper_part = text.split("--- task helper")[1]
    # a suspended task's own stack has its outermost frame only; the chain goes down
    assert "in _middle" in helper_part
    assert "in _innermost" in helper_part
    assert "await event.wait()" in helper_part
    assert "waits for <Future pending" in helper_part
    assert "(running now)" in text  # this test's own task
    event.set()
    await helper


def test_the_chain_of_a_coroutine_not_started_is_its_own_frame() -> None:
    event = asyncio.Event()
    coro = _middle(event)
    frames, innermost = taskdump.await_chain(coro)
    assert [f.f_code.co_name for f in frames] == ["_middle"]
    assert innermost is None
    coro.close()


def test_the_dump_comes_before_the_timeout() -> None:
    assert taskdump.margin(120) == 10
    assert taskdump.margin(3) == pytest.approx(0.3)


def test_a_hung_test_prints_its_tasks_before_pytest_timeout_fails_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(Path(__file__).resolve().parents[2])  # where ``tests`` imports from
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest("from tests.conftest import pytest_runtest_protocol  # noqa: F401\n")
    pytester.makepyfile(
        """
        import asyncio
        import pytest

        async def stuck_helper(event):
            await event.wait()

        @pytest.mark.timeout(3)
        async def test_hangs():
            event = asyncio.Event()
            await asyncio.wait([asyncio.create_task(stuck_helper(event), name="stuck")])
        """
    )
    options = ["asyncio_mode=auto", "asyncio_default_fixture_loop_scope=function"]
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *(f"-o{option}" for option in options)
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*Failed: Timeout (>3.0s) from pytest-timeout*",
            "*Captured stdout call*",  # (printed as the dump was written, before that)
            "*asyncio tasks of test_a_hung_test_prints*.py::test_hangs (the timeout is near)*",
            "--- task stuck",
            "*in stuck_helper",
            "*await event.wait()",
            "*asyncio tasks end*",
        ]
    )
