"""Acks straight from the NATS parser: ``NatsLink.deliver_directly`` over a stand-in for
nats-py's client (its ``_process_msg`` and ``stats``), and the ack router's direct handler,
which must match what the callback path does."""

from __future__ import annotations

from typing import Any

import pytest

from streamwire.codec.message import Confirmation
from streamwire.liftbridge import IncorrectOffset, _nats
from streamwire.liftbridge._acks import AckRouter
from streamwire.liftbridge._nats import NatsLink
from streamwire.liftbridge._nats_internals import check
from tests.unit.liftbridge.support import FakeLink
from tests.unit.liftbridge.test_acks import ack_bytes


class FakeNc:
    """What ``deliver_directly`` touches of nats-py's client."""

    def __init__(self) -> None:
        self.stats = {"in_msgs": 0, "in_bytes": 0}
        self.seen: list[tuple[int, bytes, bytes, bytes, bytes | None]] = []

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        self.seen.append((sid, subject, reply, data, headers))


class FakeSub:
    def __init__(self, sid: int) -> None:
        self._id = sid


def link_of(nc: object) -> NatsLink:
    return NatsLink(nc, ["nats://127.0.0.1:1"])  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def fast_paths_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the direct path itself: allowed as the installed nats-py allows
    it, even in a run with STREAMWIRE_NATS_FAST=0."""
    monkeypatch.setattr(_nats, "_FAST", check(environ={}))


async def test_messages_of_the_subscription_go_to_the_handler() -> None:
    nc = FakeNc()
    link = link_of(nc)
    taken: list[tuple[bytes, bytes]] = []

    def handler(subject: bytes, data: bytes) -> bool:
        taken.append((subject, data))
        return subject == b"mine"

    assert link.deliver_directly(FakeSub(7), handler)  # type: ignore[arg-type]
    await nc._process_msg(7, b"mine", b"", b"abc", None)
    assert taken == [(b"mine", b"abc")]
    assert nc.seen == []  # nats-py's own processing skipped
    assert nc.stats == {"in_msgs": 1, "in_bytes": 3}
    await nc._process_msg(7, b"other", b"r", b"x", None)  # declined: the usual way
    await nc._process_msg(7, b"mine", b"", b"y", b"NATS/1.0 503\r\n\r\n")  # headers: too
    await nc._process_msg(8, b"mine", b"", b"z", None)  # another subscription
    assert nc.seen == [
        (7, b"other", b"r", b"x", None),
        (7, b"mine", b"", b"y", b"NATS/1.0 503\r\n\r\n"),
        (8, b"mine", b"", b"z", None),
    ]
    assert taken[1:] == [(b"other", b"x")]


async def test_without_nats_py_internals_nothing_changes() -> None:
    class Bare:  # no _process_msg
        def __init__(self) -> None:
            self.stats: dict[str, int] = {}

    assert not link_of(Bare()).deliver_directly(FakeSub(1), lambda s, d: True)  # type: ignore[arg-type]
    assert not link_of(FakeNc()).deliver_directly(object(), lambda s, d: True)  # type: ignore[arg-type]


class DirectLink(FakeLink):
    def __init__(self) -> None:
        super().__init__()
        self.direct: Any = None

    def deliver_directly(self, sub: object, handler: Any) -> bool:
        self.direct = handler
        return True


@pytest.fixture
async def direct() -> tuple[AckRouter, DirectLink]:
    link = DirectLink()
    r = AckRouter(link)
    await r.start()
    assert link.direct is not None
    return r, link


async def test_direct_acks_resolve_like_the_callback_path(
    direct: tuple[AckRouter, DirectLink],
) -> None:
    r, link = direct
    inbox = r.ack_inbox.encode()
    ok, bad = r.expect("a1", 5.0), r.expect("a2", 5.0)
    assert link.direct(inbox, ack_bytes("a1", offset=17)) is True
    assert link.direct(inbox, ack_bytes("a2", error=2)) is True
    assert ok.result() == Confirmation(None, 17, "stream", 2)
    with pytest.raises(IncorrectOffset):
        bad.result()
    assert link.direct(inbox, ack_bytes("a1")) is True  # a duplicate
    assert link.direct(inbox, b"garbage") is True  # taken, and counted as invalid
    assert link.direct(b"_INBOX.test.n.a3", b"") is False  # a status: the callback's
    stats = r.stats
    assert (stats.direct, stats.acks, stats.error_acks) == (4, 2, 1)
    assert (stats.unmatched, stats.invalid) == (1, 1)
