"""Shared by the Liftbridge unit tests: the hex vectors of ``tests/vectors/liftbridge`` and a
fake NATS link for the ack router."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from nats.aio.msg import Msg

__all__ = ("VECTORS", "FakeLink", "load_vector", "vector_names")

VECTORS: Final = Path(__file__).resolve().parents[2] / "vectors" / "liftbridge"


def load_vector(name: str) -> bytes:
    """The bytes of ``<name>.hex``: ``#`` lines are comments, ``|`` and spaces ignored."""
    text = (VECTORS / f"{name}.hex").read_text(encoding="utf-8")
    digits = "".join(
        line.split("#", 1)[0].replace("|", " ")
        for line in text.splitlines()
        if not line.lstrip().startswith("#")
    )
    return bytes.fromhex("".join(digits.split()))


def vector_names() -> list[str]:
    return sorted(p.stem for p in VECTORS.glob("*.hex"))


Handler = Callable[[Msg], Awaitable[None]]


class FakeLink:
    """The NATS link an ``AckRouter`` subscribes through; ``deliver`` plays a message in."""

    def __init__(self) -> None:
        self.handler: Handler | None = None
        self.subject = ""

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def subscribe(self, subject: str, handler: Handler) -> Any:
        self.subject, self.handler = subject, handler
        return None

    async def deliver(
        self, subject: str, data: bytes, headers: dict[str, str] | None = None
    ) -> None:
        assert self.handler is not None
        await self.handler(Msg(None, subject=subject, data=data, headers=headers))  # type: ignore[arg-type]
