"""The run of ``MSG`` commands taken before nats-py's parser (``_nats_msgs.take_msgs``,
installed by ``NatsLink.deliver_directly``) against nats-py's parser alone: on random
streams of NATS commands (plain messages for a direct subscription, some refused by its
handler, messages with a reply subject or headers or for another subscription, ``PING``,
``PONG``, ``+OK``, ``INFO``), cut into random socket reads, both deliver the same messages
and events in the same order and count the same ``in_msgs``/``in_bytes``."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from nats.protocol.parser import Parser

from streamwire.liftbridge._nats import NatsLink
from streamwire.liftbridge._nats_msgs import take_msgs

DIRECT, OTHER = 7, 9


class Sub:
    _id = DIRECT


class FakeNc:
    """What NatsLink and nats-py's parser call on a client, recording every event."""

    def __init__(self) -> None:
        self.stats = {"in_msgs": 0, "in_bytes": 0}
        self.events: list[tuple[Any, ...]] = []
        self._ps = Parser(self)

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        self.events.append(("nats-py", sid, subject, reply, data, headers))

    async def _process_ping(self) -> None:
        self.events.append(("ping",))

    async def _process_pong(self) -> None:
        self.events.append(("pong",))

    async def _process_info(self, info: dict[str, Any]) -> None:
        self.events.append(("info", info))

    async def _process_err(self, err: str) -> None:
        self.events.append(("err", err))


subjects = st.sampled_from([b"_INBOX.x.a", b"refuse", b"s.0"])
payloads = st.binary(max_size=40)


@st.composite
def command(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 7))
    subject, payload = draw(subjects), draw(payloads)
    if kind <= 3:
        return b"MSG %s %d %d\r\n%s\r\n" % (subject, DIRECT, len(payload), payload)
    if kind == 4:
        return b"MSG %s %d r.1 %d\r\n%s\r\n" % (subject, DIRECT, len(payload), payload)
    if kind == 5:
        sid = draw(st.sampled_from([DIRECT, OTHER]))
        head = b"NATS/1.0\r\nA: b\r\n\r\n"
        n = len(head) + len(payload)
        return b"HMSG %s %d %d %d\r\n%s%s\r\n" % (subject, sid, len(head), n, head, payload)
    if kind == 6:
        return b"MSG %s %d %d\r\n%s\r\n" % (subject, OTHER, len(payload), payload)
    return draw(st.sampled_from([b"PING\r\n", b"PONG\r\n", b"+OK\r\n", b'INFO {"a":1}\r\n']))


def cut(data: bytes, points: list[int]) -> list[bytes]:
    bounds = sorted({p % (len(data) + 1) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


async def feed(chunks: list[bytes], runs_first: bool) -> tuple[list[tuple[Any, ...]], Any]:
    nc = FakeNc()
    link = NatsLink(nc, ["nats://x"])  # type: ignore[arg-type]
    if not runs_first:
        link._take_runs_first = lambda: None  # type: ignore[method-assign]

    def handler(subject: bytes, payload: bytes) -> bool:
        if subject == b"refuse":
            return False
        nc.events.append(("direct", subject, payload))
        return True

    assert link.deliver_directly(Sub(), handler)  # type: ignore[arg-type]
    for chunk in chunks:
        await nc._ps.parse(chunk)
    return nc.events, nc.stats


@settings(max_examples=300, deadline=None)
@given(st.lists(command(), max_size=30), st.lists(st.integers(0, 10_000), max_size=8))
def test_runs_first_delivers_what_the_parser_alone_does(
    commands: list[bytes], points: list[int]
) -> None:
    chunks = cut(b"".join(commands), points)
    assert asyncio.run(feed(chunks, True)) == asyncio.run(feed(chunks, False))


def test_take_msgs_stops_at_what_is_not_a_complete_direct_msg() -> None:
    got: list[bytes] = []

    def take(subject: bytes, payload: bytes) -> bool:
        got.append(payload)
        return True

    one = b"MSG a 7 2\r\nhi\r\n"
    assert take_msgs(one * 2, {7: take}) == (2 * len(one), 2, 4, False)
    assert take_msgs(one + b"MSG a 7 2\r\nh", {7: take}) == (len(one), 1, 2, True)
    assert take_msgs(one + b"MS", {7: take}) == (len(one), 1, 2, True)
    assert take_msgs(one + b"PING\r\n", {7: take}) == (len(one), 1, 2, False)
    assert take_msgs(b"MSG a 8 2\r\nhi\r\n", {7: take}) == (0, 0, 0, False)
    assert take_msgs(b"MSG a 7 2\r\nhiX\n", {7: take}) == (0, 0, 0, False)
    assert take_msgs(b"MSG a 7 x\r\nhi\r\n", {7: take}) == (0, 0, 0, False)
    assert got == [b"hi"] * 5


async def test_a_cut_msg_waits_for_its_end_and_a_reset_drops_it() -> None:
    nc = FakeNc()
    link = NatsLink(nc, ["nats://x"])  # type: ignore[arg-type]
    taken: list[bytes] = []

    def take(subject: bytes, payload: bytes) -> bool:
        taken.append(payload)
        return True

    assert link.deliver_directly(Sub(), take)  # type: ignore[arg-type]
    await nc._ps.parse(b"MSG a 7 2\r\nh")
    assert (taken, nc.events) == ([], [])
    await nc._ps.parse(b"i\r\nMSG a 7 2\r\n")
    assert taken == [b"hi"]
    nc._ps.reset()  # nats-py reconnected: the half command belonged to the old connection
    await nc._ps.parse(b"PING\r\n")
    assert (taken, nc.events) == ([b"hi"], [("ping",)])
    assert nc.stats == {"in_msgs": 1, "in_bytes": 2}
