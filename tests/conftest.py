"""Shared pytest configuration: hypothesis profiles; every asyncio task's await chain printed
shortly before pytest-timeout fails a test (``tests/taskdump.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests import taskdump

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# the interpreter matrix's lanes (release/matrix.py): the same examples as "ci" up to a quarter
# of its depth (they check the interpreter, not the inputs); the main interpreter runs "ci" in full
settings.register_profile("matrix", settings.get_profile("ci"), max_examples=50)
settings.register_profile("nightly", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

pytest_plugins = ["pytester"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Setup, call and teardown (what pytest-timeout times) under the task dump's timer."""
    timeout = taskdump.item_timeout(item)
    disarm = taskdump.arm(item, timeout) if timeout is not None else None
    try:
        return (yield)
    finally:
        if disarm is not None:
            disarm()
