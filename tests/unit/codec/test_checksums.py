"""Checksums against published check values and the vectors of docs/protocol/*.md."""

from __future__ import annotations

import pytest

from streamwire.codec import crc32, crc32c, verify, xxh3_64, xxh32
from streamwire.errors import ChecksumMismatchError
from tests.fresh import run_fresh

CHECK = b"123456789"


def test_crc32_check_value() -> None:
    assert crc32(CHECK) == 0xCBF43926


def test_crc32c_check_value() -> None:
    assert crc32c(CHECK) == 0xE3069283


def test_xxhash_empty_input_reference_values() -> None:
    assert xxh3_64(b"") == 0x2D06800538D394C2
    assert xxh32(b"") == 0x02CC5D05


def test_running_checksums_equal_one_shot() -> None:
    assert crc32(CHECK[4:], crc32(CHECK[:4])) == crc32(CHECK)
    assert crc32c(CHECK[4:], crc32c(CHECK[:4])) == crc32c(CHECK)


def test_osiris_chunk_crc_from_a_real_broker() -> None:
    # The data section of a Deliver captured from RabbitMQ 4.0.5
    # (docs/protocol/rabbitmq-streams.md §1.8): CRC 0x5af0b141.
    data = bytes.fromhex("00000007005375a0026d3000000007005375a0026d31")
    assert crc32(data) == 0x5AF0B141


def test_liftbridge_envelope_crc32c_vector() -> None:
    payload = bytes.fromhex(
        "08ffffffffffffffffff0112016b1a0568656c6c6f4a060a0168120176520661636b732e315a0263316001"
    )
    assert crc32c(payload) == 0x049C060F


def test_verify() -> None:
    verify("chunk", crc32, CHECK, 0xCBF43926)
    with pytest.raises(ChecksumMismatchError) as info:
        verify("chunk", crc32, CHECK, 1)
    assert info.value.expected == 1
    assert info.value.actual == 0xCBF43926
    assert "chunk" in str(info.value)


def test_crc32c_package_is_imported_on_first_use_only() -> None:
    """``import streamwire`` does not import the ``crc32c`` package (it reads its installed
    metadata at import, a cost every fresh process would pay for nothing on RabbitMQ and
    Iggy); the first CRC-32C imports it and is right."""
    code = (
        "import sys, streamwire\n"
        "from streamwire.codec import crc32c\n"
        "assert 'crc32c' not in sys.modules, 'imported early'\n"
        "assert crc32c(b'123456789') == 0xE3069283\n"
        "assert 'crc32c' in sys.modules\n"
        "assert crc32c(b'6789', crc32c(b'12345')) == 0xE3069283\n"
    )
    run_fresh(code)
