"""What keeps a gRPC call or channel alive: for a leak check's failure message.

A grpc.aio call that is still alive keeps its HTTP/2 connection open after its channel was
closed. When a leak check finds a socket left, :func:`describe_grpc_holders` names every live
grpc.aio call and channel with the chains of objects that refer to it (frames by function and
line, tasks, exceptions and tracebacks by type), so the failure says what held it.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import types
from typing import Any

__all__ = ("describe_grpc_holders",)


def _live_grpc() -> list[Any]:
    found: list[Any] = []
    for obj in gc.get_objects():
        kind = type(obj)
        module = kind.__dict__.get("__module__") if isinstance(kind, type) else None
        if (
            isinstance(module, str)
            and module.startswith("grpc.aio")
            and (kind.__name__.endswith("Call") or kind.__name__ == "Channel")
        ):
            found.append(obj)
    return found


def _name(obj: object) -> str:
    if isinstance(obj, types.FrameType):
        return f"frame {obj.f_code.co_name} ({obj.f_code.co_filename}:{obj.f_lineno})"
    if isinstance(obj, types.CoroutineType):
        return f"coroutine {obj.__qualname__}"
    if isinstance(obj, types.TracebackType):
        return f"traceback of {obj.tb_frame.f_code.co_name}"
    if isinstance(obj, dict):
        return f"dict({len(obj)})"
    return type(obj).__qualname__


_ROOTS = (asyncio.Task, types.FunctionType, type)  # where a chain has said enough


def _chains(target: object, depth: int, ignore: set[int]) -> list[str]:
    """Referrer chains of ``target``, at most ``depth`` objects long, as text lines."""
    holders = gc.get_referrers(target)
    ignore.add(id(holders))
    lines: list[str] = []
    for holder in holders:
        if id(holder) in ignore or isinstance(holder, types.ModuleType):
            continue
        here = _name(holder)
        above = (
            []
            if depth <= 1 or isinstance(holder, _ROOTS)
            else _chains(holder, depth - 1, ignore | {id(holder)})
        )
        lines.extend([f"{here} <- {a}" for a in above] or [here])
    return list(dict.fromkeys(lines))[:20]


def describe_grpc_holders(depth: int = 5) -> str:
    """grpc.aio calls and channels not yet freed (reachable, or garbage in a reference cycle
    the collector has not reached), each with what refers to it ("" when none)."""
    if "grpc" not in sys.modules:
        return ""
    live = _live_grpc()  # before any collection: garbage in a cycle is listed too
    ignore = {id(live), id(sys._getframe())}
    for obj in live:
        ignore.add(id(obj))
    parts = []
    for obj in live:
        chains = _chains(obj, depth, ignore)
        parts.append(f"{_name(obj)}:\n    " + "\n    ".join(chains or ["(no referrer)"]))
    return "\n".join(parts)
