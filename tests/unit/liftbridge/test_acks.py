"""The ack inbox router, over a fake NATS link: matching, errors, duplicates, garbage,
no-responders and deadlines."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamwire.codec.message import Confirmation
from streamwire.errors import ConnectionClosed
from streamwire.liftbridge import AckTimeout, IncorrectOffset, NoResponders, TooLarge
from streamwire.liftbridge._acks import AckRouter
from streamwire.liftbridge.protocol.envelope import MessageType, encode_envelope
from streamwire.liftbridge.protocol.errors import UnknownAckError
from streamwire.liftbridge.protocol.messages import Ack, encode_ack, encode_publish

from .support import FakeLink


def ack_bytes(cid: str, *, offset: int = 0, error: int = 0, msg_subject: str = "s.2") -> bytes:
    return encode_ack(Ack("stream", "s", msg_subject, offset, "_INBOX.test.a", cid, 0, 1, 2, error))


async def test_subscribes_one_wildcard_inbox(router: tuple[AckRouter, FakeLink]) -> None:
    r, link = router
    assert link.subject == "_INBOX.test.>"
    assert r.ack_inbox == "_INBOX.test.a"
    assert r.reply_subject("1f") == "_INBOX.test.n.1f"
    ids = {r.next_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert not any("." in i for i in ids)


async def test_ack_resolves_with_offset_and_partition(router: tuple[AckRouter, FakeLink]) -> None:
    r, link = router
    future = r.expect("a1", 5.0)
    await link.deliver(r.ack_inbox, ack_bytes("a1", offset=17))
    assert future.result() == Confirmation(None, 17, "stream", 2)
    assert r.stats.acks == 1
    assert len(r.table) == 0


@pytest.mark.parametrize(
    ("code", "cls"), [(2, IncorrectOffset), (3, TooLarge), (1, UnknownAckError)]
)
async def test_error_acks_fail_the_future(
    router: tuple[AckRouter, FakeLink], code: int, cls: type[Exception]
) -> None:
    r, link = router
    future = r.expect("e", 5.0)
    await link.deliver(r.ack_inbox, ack_bytes("e", error=code))
    with pytest.raises(cls):
        future.result()
    assert r.stats.error_acks == 1


async def test_duplicate_and_unknown_acks_are_ignored(router: tuple[AckRouter, FakeLink]) -> None:
    r, link = router
    future = r.expect("d", 5.0)
    await link.deliver(r.ack_inbox, ack_bytes("d", offset=1))
    await link.deliver(r.ack_inbox, ack_bytes("d", offset=2))  # a second stream on the subject
    await link.deliver(r.ack_inbox, ack_bytes("nobody"))
    assert future.result().offset == 1
    assert r.stats.unmatched == 2


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"plain bytes",
        encode_publish(b"x", correlation_id="g"),  # a Publish, not an Ack
        encode_envelope(MessageType.ACK, b"\xff\xff\xff"),
        bytes.fromhex("b90e43b4000c0100") + b"\x00\x00\x00\x00" + b"\x0a\x01s",  # bad CRC
    ],
)
async def test_garbage_on_the_inbox_is_counted_and_dropped(
    router: tuple[AckRouter, FakeLink], data: bytes
) -> None:
    r, link = router
    future = r.expect("g", 5.0)
    await link.deliver(r.ack_inbox, data)
    assert not future.done()
    assert r.stats.invalid == 1
    await link.deliver(r.ack_inbox, ack_bytes("g"))
    assert future.result().offset == 0


async def test_no_responders_fails_the_message(router: tuple[AckRouter, FakeLink]) -> None:
    r, link = router
    future = r.expect("n1", 5.0)
    other = r.expect("n2", 5.0)
    await link.deliver(
        r.reply_subject("n1"), b"", {"Status": "503", "Nats-Subject": "missing.subject"}
    )
    with pytest.raises(NoResponders, match=r"missing\.subject"):
        future.result()
    assert not other.done()
    await link.deliver(r.reply_subject("n2"), b"hello")  # not a status: dropped
    assert not other.done()
    assert r.stats.invalid == 1


async def test_deadlines_expire_in_order_and_late_acks_are_dropped(
    router: tuple[AckRouter, FakeLink],
) -> None:
    r, link = router
    slow = r.expect("slow", 30.0)
    fast = r.expect("fast", 0.01)
    never = r.expect("never", None)
    with pytest.raises(AckTimeout):
        await fast
    assert not slow.done()
    assert not never.done()
    await link.deliver(r.ack_inbox, ack_bytes("fast"))
    assert r.stats.unmatched == 1
    assert r.stats.timeouts == 1
    await link.deliver(r.ack_inbox, ack_bytes("slow", offset=3))
    assert slow.result().offset == 3


async def test_an_ack_read_after_a_blocked_loop_beats_its_deadline(
    router: tuple[AckRouter, FakeLink],
) -> None:
    """The loop is blocked past a message's deadline while its ack waits in the socket:
    after the block the expiry timer runs first, and reading the ack takes a few more turns
    of the loop. The late timer grants a grace instead of failing the message."""
    r, link = router
    future = r.expect("a1", 0.05)
    time.sleep(0.4)  # noqa: ASYNC251 (on purpose: the timer becomes due ~0.35 s late)

    async def read_the_ack() -> None:
        for _ in range(5):  # nats-py's read loop, parser and subscription task
            await asyncio.sleep(0)
        await link.deliver(r.ack_inbox, ack_bytes("a1", offset=17))

    await read_the_ack()
    assert (await asyncio.wait_for(future, 5)).offset == 17
    assert (r.stats.late_timers, r.stats.timeouts, r.stats.unmatched) == (1, 0, 0)


async def test_a_blocked_loop_delays_a_timeout_but_does_not_cancel_it(
    router: tuple[AckRouter, FakeLink],
) -> None:
    r, link = router
    silent = r.expect("s1", 0.05)
    time.sleep(0.4)  # noqa: ASYNC251 (on purpose: a blocked loop)
    short = r.expect("s2", 0.01)  # set during the block: its own deadline still holds
    for future in (silent, short):
        with pytest.raises(AckTimeout):
            await asyncio.wait_for(future, 5)
    assert r.stats.late_timers >= 1
    assert r.stats.timeouts == 2
    await link.deliver(r.ack_inbox, ack_bytes("s1"))  # too late now: counted, ignored
    assert r.stats.unmatched == 1


async def test_forget_cancels_and_close_fails_the_rest(router: tuple[AckRouter, FakeLink]) -> None:
    r, _ = router
    gone = r.expect("x", 5.0)
    waiting = r.expect("y", 5.0)
    r.forget("x")
    assert gone.cancelled()
    r.close()
    with pytest.raises(ConnectionClosed):
        waiting.result()
    await asyncio.sleep(0)


async def test_deadlines_of_acked_messages_do_not_pile_up(
    router: tuple[AckRouter, FakeLink],
) -> None:
    """Every message gets a deadline; once acked, its entry is dropped at the next compaction,
    so the heap stays near the number of messages still waiting, whatever the rate."""
    r, link = router
    waiting = [r.expect(r.next_id(), 60.0) for _ in range(10)]  # never acked
    for _ in range(10_000):
        cid = r.next_id()
        future = r.expect(cid, 60.0)
        await link.deliver("_INBOX.test.a", ack_bytes(cid, offset=1))
        assert future.done()
    assert len(r._expiry) <= 2 * len(r.table) + 1025
    assert len(r.table) == 10
    late = r.expect(r.next_id(), 0.01)  # deadlines still fire after compactions
    with pytest.raises(AckTimeout):
        await asyncio.wait_for(late, 5)
    assert not any(f.done() for f in waiting)
    r.close()
    assert all(isinstance(f.exception(), ConnectionClosed) for f in waiting)
