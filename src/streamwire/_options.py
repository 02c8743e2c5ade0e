"""Keyword options checked by name: an unknown or misspelled option is a
:class:`~streamwire.errors.ConfigurationError` naming the close matches, never a builtin
``TypeError`` (docs/api.md)."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TypeVar

from streamwire._default import Default
from streamwire.errors import ConfigurationError
from streamwire.transport.reconnect import ReconnectPolicy
from streamwire.transport.tcp import TcpKeepalive
from streamwire.transport.tls import is_tls_setting

__all__ = (
    "accepted_keywords",
    "build_options",
    "check_connect_values",
    "check_names",
    "option_names",
)

T = TypeVar("T")


def check_names(given: Iterable[str], known: Collection[str], what: str) -> None:
    """Raise :class:`ConfigurationError` if ``given`` has a name not in ``known``: each
    unknown name with its close matches, then every known name."""
    unknown = [name for name in given if name not in known]
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        parts.append(f"{name!r}{hint}")
    plural = "s" if len(unknown) > 1 else ""
    raise ConfigurationError(
        f"unknown {what} option{plural} {', '.join(parts)}; "
        f"known: {', '.join(sorted(known)) or 'none'}"
    )


def option_names(cls: type) -> frozenset[str]:
    """The option names an options dataclass takes."""
    return frozenset(f.name for f in dataclasses.fields(cls))


def build_options(cls: Callable[..., T], given: Mapping[str, object], what: str) -> T:
    """``cls(**given)`` for an options dataclass, with unknown names refused by
    :func:`check_names` and a wrong call turned into a :class:`ConfigurationError`."""
    check_names(given, {f.name for f in dataclasses.fields(cls)}, what)  # type: ignore[arg-type]
    try:
        return cls(**given)
    except TypeError as exc:
        raise ConfigurationError(f"{what} options: {exc}") from None


def accepted_keywords(fn: Callable[..., object]) -> frozenset[str]:
    """The names ``fn`` takes as keywords (for :func:`check_names`)."""
    params = inspect.signature(fn).parameters.values()
    return frozenset(p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


#: connect() options that are seconds (``None``: no limit).
_SECONDS = ("timeout", "request_timeout")


def check_connect_values(given: Mapping[str, object]) -> None:
    """Refuse values of the options every broker's ``connect`` shares that could never be
    right, with a :class:`ConfigurationError` saying what is expected, before anything
    connects (a ``timeout="1"`` used to fail as a ``TypeError`` deep in asyncio, a
    ``tls="yes"`` as an ``AttributeError``, and ``reconnect=True`` was taken silently)."""
    for name in _SECONDS:
        if name not in given:
            continue
        value = given[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ConfigurationError(
                f"{name} must be a positive number of seconds, or None for no limit; got "
                f"{value!r} ({type(value).__name__})"
            )
    if "tls" in given:
        tls = given["tls"]
        if not is_tls_setting(tls):
            raise ConfigurationError(
                f"tls must be True (the defaults), False or None (off), a "
                f"streamwire.TLSOptions or an ssl.SSLContext; got {tls!r} "
                f"({type(tls).__name__})"
            )
    if "reconnect" in given:
        policy = given["reconnect"]
        if not (policy is None or isinstance(policy, ReconnectPolicy | Default)):
            raise ConfigurationError(
                f"reconnect must be a ReconnectPolicy (reconnecting is on by default: leave "
                f"it out) or None (off); got {policy!r} ({type(policy).__name__})"
            )
    if "tcp_keepalive" in given:
        keepalive = given["tcp_keepalive"]
        if not (keepalive is None or isinstance(keepalive, TcpKeepalive)):
            raise ConfigurationError(
                f"tcp_keepalive must be a streamwire.transport.TcpKeepalive (on by default: "
                f"leave it out) or None (the kernel's defaults); got {keepalive!r} "
                f"({type(keepalive).__name__})"
            )
