"""Compression codecs shared by the protocols: none, gzip, snappy, lz4, zstd.

Formats are the standard *framed* ones the Java clients write: a gzip stream, the snappy
framing format, the LZ4 frame format, a zstd frame. gzip uses the standard library; the others
use cramjam. Decompression always produces exactly the size the caller expects (the size a
protocol header announced) and never more, so a hostile payload cannot expand without bound.
"""

from __future__ import annotations

import zlib
from typing import Final

import cramjam

from streamwire.codec._structs import BytesLike
from streamwire.errors import ConfigurationError, DecodeError

__all__ = ("CODECS", "compress", "decompress")

CODECS: Final = ("none", "gzip", "snappy", "lz4", "zstd")
_CRAMJAM: Final = {"snappy": cramjam.snappy, "lz4": cramjam.lz4, "zstd": cramjam.zstd}


def _check(name: str) -> None:
    if name not in CODECS:
        raise ConfigurationError(f"unknown compression {name!r}; expected one of {CODECS}")


def compress(name: str, data: BytesLike, *, level: int | None = None) -> bytes:
    """Compress ``data`` with the named codec."""
    _check(name)
    if name == "none":
        return bytes(data)
    if name == "gzip":
        c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    module = _CRAMJAM[name]
    return bytes(
        module.compress(bytes(data)) if level is None else module.compress(bytes(data), level)
    )


def decompress(name: str, data: BytesLike, size: int) -> bytes:
    """Decompress ``data`` into exactly ``size`` bytes; :class:`DecodeError` if the payload is
    corrupt, shorter, or would be longer."""
    _check(name)
    if name == "none":
        if len(data) != size:
            raise DecodeError(f"uncompressed body of {len(data)} bytes, announced {size}")
        return bytes(data)
    if name == "gzip":
        d = zlib.decompressobj(wbits=31)
        try:
            out = d.decompress(data, size + 1)
        except zlib.error as exc:
            raise DecodeError(f"gzip body: {exc}") from None
        if len(out) != size or not d.eof or d.unused_data:
            raise DecodeError("gzip body does not match its announced size")
        return out
    out_buf = bytearray(size)
    try:
        n = _CRAMJAM[name].decompress_into(bytes(data), out_buf)
    except Exception as exc:  # cramjam raises its own DecompressionError and others
        raise DecodeError(f"{name} body: {exc}") from None
    if n != size:
        raise DecodeError(f"{name} body of {n} bytes, announced {size}")
    return bytes(out_buf)
