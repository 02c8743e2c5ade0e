"""Compression codecs: round trips, the framed formats the Java clients write, exact sizes,
bounded decompression."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamwire.codec.compression import CODECS, compress, decompress
from streamwire.errors import ConfigurationError, DecodeError

MAGIC = {
    "gzip": b"\x1f\x8b",
    "snappy": b"\xff\x06\x00\x00sNaPpY",  # the snappy framing format's stream identifier
    "lz4": b"\x04\x22\x4d\x18",  # LZ4 frame format
    "zstd": b"\x28\xb5\x2f\xfd",
}


@pytest.mark.parametrize("name", sorted(MAGIC))
def test_framed_formats(name: str) -> None:
    assert compress(name, b"payload" * 10).startswith(MAGIC[name])


def test_gzip_reads_what_the_standard_library_writes() -> None:
    data = b"hello" * 100
    assert decompress("gzip", gzip.compress(data), len(data)) == data
    assert gzip.decompress(compress("gzip", data)) == data


@given(st.sampled_from(CODECS), st.binary(max_size=2000))
def test_round_trip(name: str, data: bytes) -> None:
    assert decompress(name, compress(name, data), len(data)) == data


@pytest.mark.parametrize("name", CODECS)
def test_wrong_announced_size_is_refused(name: str) -> None:
    data = b"x" * 1000
    packed = compress(name, data)
    for size in (0, 999, 1001):
        with pytest.raises(DecodeError):
            decompress(name, packed, size)


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd"])
def test_a_bomb_does_not_expand_past_the_announced_size(name: str) -> None:
    bomb = compress(name, bytes(8 * 1024 * 1024))
    with pytest.raises(DecodeError):
        decompress(name, bomb, 100)


@pytest.mark.parametrize("name", ["gzip", "snappy", "lz4", "zstd"])
def test_garbage_is_a_decode_error(name: str) -> None:
    with pytest.raises(DecodeError, match=name):
        decompress(name, b"\x00not compressed at all", 10)


def test_unknown_codec() -> None:
    with pytest.raises(ConfigurationError):
        compress("brotli", b"")
    with pytest.raises(ConfigurationError):
        decompress("brotli", b"", 0)
