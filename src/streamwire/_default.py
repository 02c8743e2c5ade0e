"""The sentinel of a keyword left out, when ``None`` means something else (``reconnect=None``:
no recovery; ``timeout=None``: no limit). A one-member enum, so that signatures say what they
take (``ReconnectPolicy | None | Default``) and ``is DEFAULT`` narrows the type."""

from __future__ import annotations

from enum import Enum
from typing import Final

__all__ = ("DEFAULT", "Default")


class Default(Enum):
    """The type of :data:`DEFAULT`."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = Default.DEFAULT
"""A keyword not given: the callee applies its documented default."""
