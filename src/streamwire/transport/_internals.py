"""What the import-time guards on other projects' internals share (docs/architecture.md,
"Other projects' internals"): checks that name what moved, and a stand-in event loop.

Each guard collects the problems it finds in a list of labels, one per internal that is
missing or of another shape, and turns its fast path off when the list is not empty.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ("StandInLoop", "check_attr", "check_call")


class StandInLoop:
    """What an ``asyncio.StreamReader`` or ``asyncio.Future`` asks of its loop while a guard
    makes one (3.11 - 3.13): whether it is in debug mode, and to schedule callbacks
    (recorded in :attr:`scheduled`, never run)."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[Any, tuple[Any, ...]]] = []

    def get_debug(self) -> bool:
        return False

    def call_soon(self, callback: Any, *args: Any, context: Any = None) -> None:
        self.scheduled.append((callback, args))


def _params(func: Any) -> list[str] | None:
    """The parameter names of a call (without ``self``), or None if it is not one."""
    if not callable(func):
        return None
    try:
        return [p for p in inspect.signature(func).parameters if p != "self"]
    except (TypeError, ValueError):
        return None


def check_call(
    problems: list[str],
    owner: object,
    name: str,
    label: str,
    params: list[str],
    coroutine: bool,
) -> None:
    """``owner.name`` is a call taking ``params``, a coroutine function or not as said;
    else ``label(params) as a coroutine`` (or ``as a function``) joins ``problems``."""
    found = getattr(owner, name, None)
    if _params(found) != params or inspect.iscoroutinefunction(found) != coroutine:
        kind = "a coroutine" if coroutine else "a function"
        problems.append(f"{label}({', '.join(params)}) as {kind}")


def check_attr(
    problems: list[str], owner: object, name: str, label: str, kind: type | None
) -> None:
    """``owner.name`` exists and, when ``kind`` is given, is one; else ``label`` (or
    ``label as kind``) joins ``problems``."""
    if not hasattr(owner, name):
        problems.append(label)
    elif kind is not None and not isinstance(getattr(owner, name), kind):
        problems.append(f"{label} as {kind.__name__}")
