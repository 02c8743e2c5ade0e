"""What became of sent messages, for fault scenarios: each sent value with the future of its
confirmation, settled within a bound, split into failures and ``offset → value``."""

from __future__ import annotations

import asyncio

from streamwire.codec.message import Confirmation

__all__ = ("Sent", "confirmed", "failures", "settle")

Sent = list[tuple[bytes, "asyncio.Future[Confirmation]"]]


async def settle(sent: Sent, bound: float) -> None:
    """Every future ends (confirmed or failed) within ``bound`` seconds."""
    futures = [f for _, f in sent]
    if futures:
        _, pending = await asyncio.wait(futures, timeout=bound)
        assert not pending, f"{len(pending)} of {len(futures)} futures still pending"


def failures(sent: Sent) -> list[BaseException]:
    return [exc for _, f in sent if (exc := f.exception()) is not None]


def confirmed(sent: Sent) -> dict[int, bytes]:
    """offset → value of every confirmed message (the futures must have settled)."""
    out: dict[int, bytes] = {}
    for value, f in sent:
        if f.exception() is None:
            offset = f.result().offset
            assert offset is not None
            out[offset] = value
    return out
