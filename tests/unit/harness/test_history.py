"""The history checker: each anomaly it names is found in a history built to have it, and a
clean run reports none."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from integration.harness.history import History, Stored, check


def clock() -> History:
    ticks = itertools.count()
    return History(clock=lambda: float(next(ticks)))


def clean_run() -> tuple[History, list[Stored]]:
    h = clock()
    for i in range(4):
        h.send("p", f"m{i}")
        h.ack("p", f"m{i}", 0, i)
    h.read("c", "m0", 0, 0)
    h.store("c", 0, 0)
    h.resume("c", 0, 0)
    h.read("c", "m1", 0, 1)
    return h, [Stored(0, i, f"m{i}") for i in range(4)]


def test_a_clean_run_has_no_anomaly() -> None:
    h, final = clean_run()
    report = check(h, final)
    assert report.ok(deduplicating=True)
    assert (report.sent, report.acked, report.failed, report.unknown) == (4, 4, 0, 0)
    assert "lost 0, duplicated 0, order 0" in report.summary()


def test_an_acknowledged_send_missing_from_the_stream_is_lost() -> None:
    h, final = clean_run()
    report = check(h, [s for s in final if s.id != "m2"])
    assert report.lost == ["m2"]
    assert not report.ok(deduplicating=False)


def test_a_failed_or_unknown_send_missing_is_not_lost() -> None:
    h, final = clean_run()
    h.send("p", "x")
    h.fail("p", "x", ConnectionResetError("reset"))
    h.send("p", "y")
    h.unknown("p", "y", "timed out")
    report = check(h, final)
    assert (report.failed, report.unknown, report.lost) == (1, 1, [])
    assert h.events[-3].detail == "ConnectionResetError: reset"
    assert report.ok(deduplicating=True)


def test_duplicates_fail_only_a_deduplicating_run() -> None:
    h, final = clean_run()
    report = check(h, [*final, Stored(0, 4, "m1")])
    assert report.duplicated == {"m1": 2}
    assert report.ok(deduplicating=False)
    assert not report.ok(deduplicating=True)


def test_two_sends_stored_in_the_other_order_break_the_order() -> None:
    h, _ = clean_run()
    swapped = [Stored(0, 0, "m0"), Stored(0, 1, "m2"), Stored(0, 2, "m1"), Stored(0, 3, "m3")]
    report = check(h, swapped)
    assert report.order == [("p", 0, "m1", "m2")]  # m1 sent first, m2 stored before it
    assert not report.ok(deduplicating=False)
    # a retry counts from its last send: m1 failed, was sent again after m2, and was stored
    # after it, in the order of the sends that were acknowledged
    h2 = clock()
    h2.send("p", "m1")
    h2.fail("p", "m1", "reset")
    h2.send("p", "m2")
    h2.ack("p", "m2", 0, 0)
    h2.send("p", "m1")
    h2.ack("p", "m1", 0, 1)
    assert check(h2, [Stored(0, 0, "m2"), Stored(0, 1, "m1")]).order == []


def test_messages_nobody_sent_are_unexpected() -> None:
    h, final = clean_run()
    h.read("c", "ghost-read", 0, 9)
    report = check(h, [*final, Stored(0, 4, "ghost")])
    assert report.unexpected == ["ghost", "ghost-read"]


def test_a_resume_that_skips_or_repeats_is_reported() -> None:
    h, final = clean_run()
    h.resume("c", 0, 1)  # stored 1: the next message is at 2
    h.read("c", "m3", 0, 3)
    h.resume("c", 0, 2)
    h.read("c", "m1", 0, 1)
    report = check(h, final)
    assert report.resume_skips == [("c", 0, 1, 3)]
    assert report.resume_repeats == [("c", 0, 2, 1)]
    # offsets without a message (RabbitMQ's tracking chunks) are no skip
    h2 = clock()
    h2.send("p", "a")
    h2.ack("p", "a", 0, 5)
    h2.resume("c", 0, 2)
    h2.read("c", "a", 0, 5)
    assert check(h2, [Stored(0, 5, "a")]).ok(deduplicating=True)


def test_recovery_is_measured_from_the_heal() -> None:
    h = clock()  # each event one tick later than the one before
    h.fault("blackhole")
    h.send("p", "a")
    h.heal("blackhole")
    h.ack("p", "a", 0, 0)
    h.fault("cut")
    h.heal("cut")
    report = check(h, [Stored(0, 0, "a")])
    assert report.recovery == {"blackhole": 1.0, "cut": None}
    assert "1 never" in report.summary()


def test_a_history_is_written_and_loaded_again(tmp_path: Path) -> None:
    h, final = clean_run()
    h.fail("p", "z", TimeoutError("slow"))
    h.dump(tmp_path / "history.jsonl")
    again = History.load(tmp_path / "history.jsonl")
    assert again.events == h.events
    assert check(again, final) == check(h, final)


@given(st.permutations(list(range(12))), st.sets(st.integers(0, 11)))
def test_every_acknowledged_id_left_out_is_lost_and_nothing_else(
    order: list[int], left_out: set[int]
) -> None:
    h = clock()
    for i in range(12):
        h.send("p", f"m{i}")
        h.ack("p", f"m{i}", 0, i)
    final = [Stored(0, i, f"m{i}") for i in range(12) if i not in left_out]
    report = check(h, final)
    assert report.lost == sorted(f"m{i}" for i in left_out)
    assert report.order == []
    # stored in a shuffled order: every id stored before one sent earlier is named
    shuffled = [Stored(0, at, f"m{i}") for at, i in enumerate(order)]
    swapped = check(h, shuffled).order
    assert (swapped == []) == (order == sorted(order))
