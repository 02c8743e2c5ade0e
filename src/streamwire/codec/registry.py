"""Server error codes to exception classes, one registry per protocol.

Each protocol declares its code table once (ideally generated from the upstream table with a
provenance note) through :meth:`ErrorRegistry.define`, which creates one
:class:`~streamwire.errors.ServerError` subclass per code. ``from_code`` always returns an
instance: unknown codes map to the protocol's ``Unknown...`` class with the code kept.
"""

from __future__ import annotations

import re

from streamwire.errors import CODE_LOOKUPS, ServerError

__all__ = ("ErrorRegistry", "registry_for")

_REGISTRIES: dict[str, ErrorRegistry] = {}


class ErrorRegistry:
    """Maps a protocol's codes to :class:`ServerError` subclasses; duplicate codes are refused."""

    def __init__(self, protocol: str, base: type[ServerError], unknown: type[ServerError]) -> None:
        if protocol in _REGISTRIES:
            raise ValueError(f"an error registry for {protocol!r} exists already")
        self.protocol = protocol
        self.base = base
        self.unknown = unknown
        self._classes: dict[int, type[ServerError]] = {}
        _REGISTRIES[protocol] = self
        CODE_LOOKUPS[protocol] = self.from_code

    def register(self, cls: type[ServerError]) -> type[ServerError]:
        code = cls.default_code
        if code is None:
            raise ValueError(f"{cls.__name__} has no default_code")
        if code in self._classes:
            other = self._classes[code].__name__
            raise ValueError(f"{self.protocol} code {code:#x} is taken by {other}")
        self._classes[code] = cls
        return cls

    def define(
        self,
        name: str,
        code: int,
        doc: str,
        *,
        retriable: bool = False,
        connection_usable: bool = True,
        bases: tuple[type[BaseException], ...] = (),
        module: str | None = None,
    ) -> type[ServerError]:
        """Create, register and return the class for one code."""
        namespace: dict[str, object] = {
            "__doc__": doc,
            "default_code": code,
            "code_name": _upper_snake(name),
            "description": doc.strip().splitlines()[0] if doc.strip() else "",
            "retriable": retriable,
            "connection_usable": connection_usable,
            "__module__": module or self.base.__module__,
        }
        cls = type(name, (self.base, *bases), namespace)
        self.register(cls)
        return cls

    def class_for(self, code: int) -> type[ServerError]:
        return self._classes.get(code, self.unknown)

    def from_code(self, code: int, message: str = "") -> ServerError:
        cls = self._classes.get(code)
        if cls is None:
            return self.unknown(message or f"unknown error code {code}", code=code)
        return cls(message or (cls.__doc__ or cls.__name__).strip().splitlines()[0], code=code)

    def codes(self) -> dict[int, type[ServerError]]:
        return dict(self._classes)


def _upper_snake(name: str) -> str:
    """``StreamDoesNotExist`` -> ``STREAM_DOES_NOT_EXIST`` (digit runs and acronyms kept)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).upper()


def registry_for(protocol: str) -> ErrorRegistry:
    """The registry of a protocol whose package has been imported."""
    try:
        return _REGISTRIES[protocol]
    except KeyError:
        raise LookupError(f"no error registry for {protocol!r}") from None
