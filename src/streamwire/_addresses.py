"""Advertised broker addresses mapped to the ones to dial: an ``address_resolver`` written as
data (RabbitMQ and Liftbridge clients dial the addresses their brokers advertise).

A plain mapping, so that it can come from JSON (the Spark data source's ``connectOptions``),
be compared and hashed (a cache key), and pickled to executors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from streamwire.errors import ConfigurationError

__all__ = ("AddressMap",)

_Address = tuple[str, int | None]


def _parse(text: object, what: str) -> _Address:
    """``host:port`` (IPv6 in brackets), or ``host`` alone (any port)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"{what} must be a 'host:port' or 'host' string, got {text!r}")
    value = text.strip()
    if value.startswith("["):  # [v6]:port or [v6]
        host, _, rest = value[1:].partition("]")
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise ConfigurationError(f"{what} {text!r}: expected '[host]:port'")
        port_text = rest[1:]
    elif value.count(":") == 1:
        host, _, port_text = value.partition(":")
    else:  # a name, an IPv4 address, or a bare IPv6 address
        return value, None
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigurationError(f"{what} {text!r}: the port is not a number") from None
    if not 0 < port < 65536 or not host:
        raise ConfigurationError(f"{what} {text!r}: expected a host and a port in 1-65535")
    return host, port


def _show(address: _Address) -> str:
    host, port = address
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


class AddressMap(Mapping[str, str]):
    """Where to connect instead of an address a broker advertises: ``{"advertised":
    "reachable"}``, each a ``"host:port"``, or a ``"host"`` alone for every port of it (its
    value then a host too: the port is kept). Pass it as ``address_resolver`` (it is one:
    ``(host, port) -> (host, port)``); an address it does not name is dialled as advertised.

    ``streamwire.connect(url, address_resolver=AddressMap({"rabbit-1:5552":
    "localhost:15552"}))``, or in Spark's ``connectOptions``: ``{"address_resolver":
    {"rabbit-1:5552": "localhost:15552"}}``."""

    __slots__ = ("_hosts", "_pairs")

    def __init__(self, entries: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = entries.items() if isinstance(entries, Mapping) else entries
        pairs: dict[tuple[str, int], tuple[str, int]] = {}
        hosts: dict[str, str] = {}
        for advertised, reachable in items:
            key = _parse(advertised, "an advertised address")
            value = _parse(reachable, f"the address for {advertised!r}")
            if (key[1] is None) != (value[1] is None):
                raise ConfigurationError(
                    f"{advertised!r} -> {reachable!r}: map a host:port to a host:port, or a "
                    "host to a host (every port of it, kept)"
                )
            if key[1] is None:
                hosts[key[0]] = value[0]
            else:
                assert value[1] is not None
                pairs[(key[0], key[1])] = (value[0], value[1])
        self._pairs = pairs
        self._hosts = hosts

    def __call__(self, host: str, port: int) -> tuple[str, int]:
        found = self._pairs.get((host, port))
        if found is not None:
            return found
        return self._hosts.get(host, host), port

    def _entries(self) -> dict[str, str]:
        out = {_show(k): _show(v) for k, v in self._pairs.items()}
        out.update({_show((k, None)): _show((v, None)) for k, v in self._hosts.items()})
        return out

    def __getitem__(self, key: str) -> str:
        return self._entries()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._pairs) + len(self._hosts)

    def __hash__(self) -> int:
        return hash(frozenset(self._entries().items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._entries() == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"AddressMap({self._entries()!r})"

    def __reduce__(self) -> tuple[type[AddressMap], tuple[dict[str, str]]]:
        return AddressMap, (self._entries(),)
