"""Shared by the Liftbridge unit tests: the hex vectors of ``tests/vectors/liftbridge``."""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ("VECTORS", "load_vector", "vector_names")

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
