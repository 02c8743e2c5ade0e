"""The nats-py internals the NATS fast paths rely on, checked once, at import.

Two fast paths of :class:`~streamwire.liftbridge._nats.NatsLink` reach into nats-py
(``pyproject.toml`` bounds it to the versions they were checked with):

- **bulk publishing** (``NatsLink.publish_many``): a run of ``PUB`` commands as one entry of
  nats-py's write buffer, through ``Client._send_command(data)``,
  ``Client._flush_pending()``, ``Client._flush_queue`` and the ``Client.stats`` dict;
- **direct delivery** (``NatsLink.deliver_directly``, the ack inbox): the parser's call of
  ``Client._process_msg(sid, subject, reply, data, headers)`` is replaced, and a socket read
  reaches ``Parser.parse(data)`` after a walk of its plain ``MSG`` commands, which reads
  ``Parser.buf`` (a ``bytearray``), ``Parser.state`` (an ``int``, compared with
  ``nats.protocol.parser.AWAITING_CONTROL_LINE``) and ``Subscription._id``.

:func:`check` builds a nats-py ``Client`` and a ``Subscription`` (no I/O) and looks at each of
those names: its presence, and for the calls their parameters. What is missing or of another
shape is named in the report, logged once at INFO, and :class:`NatsLink` then uses nats-py's
public ``publish`` and subscription callbacks for that path (docs/architecture.md, "Other
projects' internals"). ``STREAMWIRE_NATS_FAST=0`` switches both fast paths off.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Final

import nats.protocol.parser as nats_parser
from nats.aio.client import Client as NatsClient
from nats.aio.subscription import Subscription

from streamwire.transport._internals import check_attr, check_call

__all__ = ("AWAITING_CONTROL_LINE", "FAST_ENV", "REPORT", "Report", "check")

logger = logging.getLogger(__name__)

FAST_ENV: Final = "STREAMWIRE_NATS_FAST"
"""``0`` switches the fast paths off (any other value, or none, leaves them to the check)."""


@dataclass(frozen=True, slots=True)
class Report:
    """What :func:`check` found: the fast paths it allows and the names that stopped them."""

    version: str
    bulk_missing: tuple[str, ...] = field(default=())
    direct_missing: tuple[str, ...] = field(default=())
    switched_off: bool = False

    @property
    def bulk(self) -> bool:
        """Whether ``publish_many`` may write one buffer entry for many messages."""
        return not self.switched_off and not self.bulk_missing

    @property
    def direct(self) -> bool:
        """Whether ``deliver_directly`` may take messages from the parser."""
        return not self.switched_off and not self.direct_missing

    def describe(self) -> str:
        if self.switched_off:
            return f"nats-py {self.version}: fast paths switched off ({FAST_ENV}=0)"
        if not (self.bulk_missing or self.direct_missing):
            return f"nats-py {self.version}: the internals the fast paths use are as expected"
        parts = []
        if self.bulk_missing:
            parts.append(f"bulk publishing off ({', '.join(self.bulk_missing)})")
        if self.direct_missing:
            parts.append(f"direct delivery off ({', '.join(self.direct_missing)})")
        return f"nats-py {self.version}: {'; '.join(parts)}: public API used instead"


def check(
    client_factory: Callable[[], Any] = NatsClient,
    subscription_factory: Callable[[Any], Any] = lambda nc: Subscription(nc, id=1),
    parser_module: Any = nats_parser,
    environ: Any = os.environ,
) -> Report:
    """Look at the internals the fast paths use (see the module notes)."""
    try:
        version = metadata.version("nats-py")
    except metadata.PackageNotFoundError:  # pragma: no cover - vendored or renamed
        version = "unknown"
    if environ.get(FAST_ENV, "") == "0":
        return Report(version, switched_off=True)
    nc = client_factory()
    bulk: list[str] = []
    check_call(bulk, nc, "_send_command", "Client._send_command", ["cmd", "priority"], True)
    check_call(bulk, nc, "_flush_pending", "Client._flush_pending", ["force_flush"], True)
    check_attr(bulk, nc, "_flush_queue", "Client._flush_queue", None)
    check_attr(bulk, nc, "stats", "Client.stats", dict)
    check_attr(bulk, nc, "is_draining_pubs", "Client.is_draining_pubs", bool)
    direct: list[str] = []
    params = ["sid", "subject", "reply", "data", "headers"]
    check_call(direct, nc, "_process_msg", "Client._process_msg", params, True)
    check_attr(direct, nc, "stats", "Client.stats", dict)
    parser = getattr(nc, "_ps", None)
    if parser is None:
        direct.append("Client._ps")
    else:
        check_call(direct, parser, "parse", "Parser.parse", ["data"], True)
        check_attr(direct, parser, "buf", "Parser.buf", bytearray)
        check_attr(direct, parser, "state", "Parser.state", int)
    check_attr(direct, parser_module, "AWAITING_CONTROL_LINE", "parser.AWAITING_CONTROL_LINE", int)
    check_attr(direct, subscription_factory(nc), "_id", "Subscription._id", int)
    return Report(version, tuple(bulk), tuple(direct))


REPORT: Final = check()
"""What this process found, once, at import."""
AWAITING_CONTROL_LINE: Final[int] = getattr(nats_parser, "AWAITING_CONTROL_LINE", -1)

if not (REPORT.bulk and REPORT.direct):
    logger.info("%s", REPORT.describe())
