"""Typed headers survive Liftbridge's map<string, bytes> through the kinds header, and
anything else (other clients, malformed kinds) still decodes as Raw."""

from __future__ import annotations

import json

import pytest

from streamwire import HeaderValue
from streamwire.errors import ConfigurationError
from streamwire.liftbridge.protocol.messages import KINDS_HEADER, headers_from_wire, headers_to_wire

TYPED = {
    "s": HeaderValue.string("café"),
    "i": HeaderValue.int32(-7),
    "u": HeaderValue.uint128((1 << 128) - 1),
    "f": HeaderValue.float32(1.5),
    "b": HeaderValue.boolean(True),
    "r": HeaderValue.raw(b"\x00\xff"),
}


def test_round_trip_keeps_kinds_and_canonical_bytes() -> None:
    wire = headers_to_wire(TYPED)
    assert wire["s"] == "café".encode()
    assert wire["i"] == (-7).to_bytes(4, "little", signed=True)
    kinds = json.loads(wire[KINDS_HEADER])
    assert "r" not in kinds
    assert kinds["i"] == 6
    assert headers_from_wire(wire) == TYPED


def test_raw_only_headers_add_nothing() -> None:
    wire = headers_to_wire({"r": HeaderValue.raw(b"x")})
    assert wire == {"r": b"x"}


def test_headers_from_other_clients_are_raw() -> None:
    assert headers_from_wire({"a": b"1"}) == {"a": HeaderValue.raw(b"1")}


@pytest.mark.parametrize(
    "kinds", [b"not json", b"[1, 2]", b'{"i": "six"}', b'{"i": 99}', b'{"i": 7}']
)
def test_malformed_kinds_fall_back_to_raw(kinds: bytes) -> None:
    got = headers_from_wire({"i": b"\x01\x02", KINDS_HEADER: kinds})
    assert got["i"] == HeaderValue.raw(b"\x01\x02")


def test_reserved_names_are_refused() -> None:
    for name in ("subject", "reply", KINDS_HEADER):
        with pytest.raises(ConfigurationError):
            headers_to_wire({name: HeaderValue.raw(b"x")})


def test_server_headers_are_dropped_unless_asked() -> None:
    wire = {"subject": b"s", "reply": b"", "a": b"1"}
    assert set(headers_from_wire(wire)) == {"a"}
    assert set(headers_from_wire(wire, server_headers=True)) == {"subject", "reply", "a"}
