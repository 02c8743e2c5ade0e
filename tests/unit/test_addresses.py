"""``streamwire.AddressMap``: an ``address_resolver`` written as data."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

import streamwire


def test_mapped_addresses_are_dialled_instead_and_others_as_advertised() -> None:
    m = streamwire.AddressMap(
        {"rabbit-1:5552": "localhost:15552", "node-2": "127.0.0.2", "[::1]:9292": "[::2]:19292"}
    )
    assert m("rabbit-1", 5552) == ("localhost", 15552)
    assert m("rabbit-1", 5553) == ("rabbit-1", 5553)  # another port: as advertised
    assert m("node-2", 4000) == ("127.0.0.2", 4000)  # a host alone: every port, kept
    assert m("::1", 9292) == ("::2", 19292)
    assert m("elsewhere", 1) == ("elsewhere", 1)
    assert dict(m) == {
        "rabbit-1:5552": "localhost:15552",
        "[::1]:9292": "[::2]:19292",
        "node-2": "127.0.0.2",
    }
    assert len(m) == 3


def test_it_compares_hashes_and_pickles_as_its_entries() -> None:
    """What a cache keyed by connect options needs, and a Spark executor receiving it."""
    a = streamwire.AddressMap({"a:1": "b:2"})
    b = streamwire.AddressMap([("a:1", "b:2")])
    assert a == b
    assert a == {"a:1": "b:2"}
    assert hash(a) == hash(b)
    assert a != streamwire.AddressMap({"a:1": "b:3"})
    copy = pickle.loads(pickle.dumps(a))  # noqa: S301 (our own bytes)
    assert copy == a
    assert copy("a", 1) == ("b", 2)


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        ({"a:1": "b"}, "host:port to a host:port"),
        ({"a": "b:2"}, "host:port to a host:port"),
        ({"a:x": "b:2"}, "not a number"),
        ({"a:0": "b:2"}, "1-65535"),
        ({"a:1": ""}, "'host:port' or 'host' string"),
        ({"[::1]x": "b"}, r"'\[host\]:port'"),
    ],
)
def test_a_malformed_entry_is_a_configuration_error_naming_it(
    entries: dict[str, str], says: str
) -> None:
    with pytest.raises(streamwire.ConfigurationError, match=says):
        streamwire.AddressMap(entries)


def test_a_non_string_entry_is_refused() -> None:
    with pytest.raises(streamwire.ConfigurationError, match="string"):
        streamwire.AddressMap({"a:1": 2})  # type: ignore[arg-type]


_hosts = st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True)
_ports = st.integers(1, 65535)


@given(st.dictionaries(st.tuples(_hosts, _ports), st.tuples(_hosts, _ports), max_size=8))
def test_host_port_entries_round_trip_through_their_strings(
    pairs: dict[tuple[str, int], tuple[str, int]],
) -> None:
    m = streamwire.AddressMap({f"{h}:{p}": f"{h2}:{p2}" for (h, p), (h2, p2) in pairs.items()})
    again = streamwire.AddressMap(dict(m))
    assert again == m
    for (h, p), target in pairs.items():
        assert m(h, p) == target
