"""Checksums used on the wire, behind one small API.

* CRC-32 (IEEE, as ``zlib.crc32``): Osiris chunk CRC in RabbitMQ Streams Deliver frames and
  Liftbridge/go-liftbridge partition hashing.
* CRC-32C (Castagnoli): the optional Liftbridge envelope CRC.
* XXH3-64 (seed 0): Iggy 0.9 message, batch and request checksums.
* XXH32 (seed 0): Iggy ``MessagesKey`` partitioning.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import xxhash

from streamwire.codec._structs import BytesLike
from streamwire.errors import ChecksumMismatchError

__all__ = ("crc32", "crc32c", "verify", "xxh3_64", "xxh32")


def crc32(data: BytesLike, value: int = 0) -> int:
    """CRC-32/ISO-HDLC (zlib); ``value`` continues a running checksum."""
    return zlib.crc32(data, value)


_crc32c_impl: Callable[[BytesLike, int], int] | None = None


def _load_crc32c() -> Callable[[BytesLike, int], int]:
    """The ``crc32c`` package's function, imported on first use: the package reads its own
    version from its installed metadata at import (``importlib.metadata``), a few dozen
    milliseconds every fresh process (a Spark Python worker, the CLI) paid even where no
    CRC-32C is ever computed (RabbitMQ, Iggy)."""
    global _crc32c_impl
    import crc32c as package

    _crc32c_impl = package.crc32c
    return _crc32c_impl


def crc32c(data: BytesLike, value: int = 0) -> int:
    """CRC-32C (Castagnoli); ``value`` continues a running checksum."""
    impl = _crc32c_impl or _load_crc32c()
    return int(impl(data, value))


def xxh3_64(data: BytesLike, seed: int = 0) -> int:
    """XXH3 64-bit."""
    return int(xxhash.xxh3_64_intdigest(data, seed))


def xxh32(data: BytesLike, seed: int = 0) -> int:
    """XXH32."""
    return int(xxhash.xxh32_intdigest(data, seed))


def verify(
    what: str, algorithm: Callable[[BytesLike], int], data: BytesLike, expected: int
) -> None:
    """Raise :class:`ChecksumMismatchError` unless ``algorithm(data) == expected``."""
    actual = algorithm(data)
    if actual != expected:
        raise ChecksumMismatchError(what, expected, actual)
