"""The history of a fault run and the checker that reads it, Jepsen-style.

A workload records every operation as it happens: a send attempted, acknowledged (where it
was stored), failed (with which error) or of unknown outcome (timed out); every message a
consumer read, with its offset; every offset a consumer stored, and where a restarted
consumer resumed; every fault injected and healed. After the run the stream is read back
whole (the *final read*), and :func:`check` reports, against it:

* **lost**: acknowledged sends whose message is not in the stream;
* **duplicated**: messages stored more than once (a deduplicating producer promises none;
  a plain one retrying an unknown outcome may store one twice: reported, and counted as a
  failure only when the run promised deduplication);
* **order**: two acknowledged sends of one producer to one partition stored in the other
  order than they were sent;
* **unexpected**: messages in the stream, or read by a consumer, that no producer sent;
* **resume skips and repeats**: a consumer restarted from a stored offset whose first read
  came after the first message at or past it (a skip), or before it (a repeat);
* **recovery**: seconds from each heal to the first successful operation after it.

Messages are told apart by an id the workload puts in each (a header or the value itself).
A history can be written as JSON lines and loaded again (``dump``/``load``), so a failed run
leaves its evidence. Standard library only.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ("Event", "History", "Report", "Stored", "check")

Kind = Literal["send", "ack", "fail", "unknown", "read", "store", "resume", "fault", "heal"]


@dataclass(frozen=True, slots=True)
class Event:
    """One operation: when (seconds on the history's clock), what, by whom, on which
    message, partition and offset, and a detail (an error, a fault's name)."""

    at: float
    kind: Kind
    actor: str
    id: str = ""
    partition: int | None = None
    offset: int | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Stored:
    """One message of the final read: where it is and which id it carries."""

    partition: int
    offset: int
    id: str


class History:
    """Operations in the order they happened (thread-safe enough for one event loop: each
    record is one ``list.append``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.events: list[Event] = []

    def _add(
        self,
        kind: Kind,
        actor: str,
        *,
        id: str = "",  # the message id, as Event names it
        partition: int | None = None,
        offset: int | None = None,
        detail: str = "",
    ) -> None:
        self.events.append(Event(self._clock(), kind, actor, id, partition, offset, detail))

    def send(self, producer: str, msg_id: str) -> None:
        self._add("send", producer, id=msg_id)

    def ack(self, producer: str, msg_id: str, partition: int, offset: int | None) -> None:
        self._add("ack", producer, id=msg_id, partition=partition, offset=offset)

    def fail(self, producer: str, msg_id: str, error: BaseException | str) -> None:
        self._add("fail", producer, id=msg_id, detail=_describe(error))

    def unknown(self, producer: str, msg_id: str, why: BaseException | str) -> None:
        self._add("unknown", producer, id=msg_id, detail=_describe(why))

    def read(self, consumer: str, msg_id: str, partition: int, offset: int) -> None:
        self._add("read", consumer, id=msg_id, partition=partition, offset=offset)

    def store(self, consumer: str, partition: int, offset: int) -> None:
        self._add("store", consumer, partition=partition, offset=offset)

    def resume(self, consumer: str, partition: int, after: int) -> None:
        """``consumer`` restarted on ``partition`` from the stored offset ``after``: its next
        read should be the first message past it."""
        self._add("resume", consumer, partition=partition, offset=after)

    def fault(self, name: str) -> None:
        self._add("fault", "nemesis", detail=name)

    def heal(self, name: str) -> None:
        self._add("heal", "nemesis", detail=name)

    def dump(self, path: Path) -> None:
        with path.open("w", encoding="utf-8") as out:
            for event in self.events:
                out.write(json.dumps(asdict(event)) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        history = cls()
        with path.open(encoding="utf-8") as lines:
            history.events = [Event(**json.loads(line)) for line in lines if line.strip()]
        return history


def _describe(error: BaseException | str) -> str:
    return error if isinstance(error, str) else f"{type(error).__name__}: {error}"


@dataclass
class Report:
    """What :func:`check` found. ``ok(deduplicating=...)`` is the verdict."""

    sent: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: dict[str, int] = field(default_factory=dict)
    #: (producer, partition, id sent first, id sent later but stored before it)
    order: list[tuple[str, int, str, str]] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    #: (consumer, partition, stored offset resumed after, first offset read then)
    resume_skips: list[tuple[str, int, int, int]] = field(default_factory=list)
    resume_repeats: list[tuple[str, int, int, int]] = field(default_factory=list)
    #: fault name -> seconds from its heal to the first successful operation (None: none)
    recovery: dict[str, float | None] = field(default_factory=dict)

    def ok(self, *, deduplicating: bool) -> bool:
        anomalies = (
            self.lost or self.order or self.unexpected or self.resume_skips
            or self.resume_repeats or (deduplicating and self.duplicated)
        )  # fmt: skip
        return not anomalies

    def summary(self) -> str:
        recovered = [s for s in self.recovery.values() if s is not None]
        return (
            f"{self.sent} sent, {self.acked} acknowledged, {self.failed} failed, "
            f"{self.unknown} unknown; lost {len(self.lost)}, duplicated "
            f"{sum(n - 1 for n in self.duplicated.values())}, order {len(self.order)}, "
            f"unexpected {len(self.unexpected)}, resume skips {len(self.resume_skips)}, "
            f"repeats {len(self.resume_repeats)}; recovery "
            + (f"max {max(recovered):.2f} s" if recovered else "-")
            + (
                f", {len(self.recovery) - len(recovered)} never"
                if None in self.recovery.values()
                else ""
            )
        )


def check(history: History, final: Sequence[Stored]) -> Report:
    """Check ``history`` against ``final``, the whole stream read back after the run."""
    events = history.events
    report = Report()
    sends: dict[str, int] = {}  # id -> index of its latest send (a retry sends again)
    producer_of: dict[str, str] = {}
    acked: dict[str, int] = {}  # id -> send index of the attempt acknowledged
    for index, e in enumerate(events):
        if e.kind == "send":
            sends[e.id] = index
            producer_of[e.id] = e.actor
        elif e.kind == "ack":
            acked.setdefault(e.id, sends.get(e.id, index))
    report.sent = len(sends)
    report.acked = len(acked)
    outcomes = {e.id: e.kind for e in events if e.kind in ("fail", "unknown") and e.id not in acked}
    report.failed = sum(1 for k in outcomes.values() if k == "fail")
    report.unknown = sum(1 for k in outcomes.values() if k == "unknown")

    counts = Counter(s.id for s in final)
    report.lost = sorted(i for i in acked if i not in counts)
    report.duplicated = {i: n for i, n in sorted(counts.items()) if n > 1}
    read_ids = {e.id for e in events if e.kind == "read"}
    report.unexpected = sorted(i for i in set(counts) | read_ids if i not in sends)
    report.order = _order(acked, producer_of, final)
    report.resume_skips, report.resume_repeats = _resumes(events, final)
    report.recovery = _recovery(events)
    return report


def _order(
    acked: dict[str, int], producer_of: dict[str, str], final: Iterable[Stored]
) -> list[tuple[str, int, str, str]]:
    """Per producer and partition, acknowledged ids whose stored offsets do not increase in
    the order they were sent (the first copy of each counts)."""
    first: dict[str, Stored] = {}
    for s in final:
        first.setdefault(s.id, s)
    lanes: dict[tuple[str, int], list[tuple[int, str, int]]] = {}
    for msg_id, sent_at in acked.items():
        where = first.get(msg_id)
        if where is not None:
            key = (producer_of.get(msg_id, "?"), where.partition)
            lanes.setdefault(key, []).append((sent_at, msg_id, where.offset))
    out: list[tuple[str, int, str, str]] = []
    for (producer, partition), entries in sorted(lanes.items()):
        entries.sort()
        highest: tuple[int, str] | None = None  # (offset, id) of the furthest stored so far
        for _, msg_id, offset in entries:
            if highest is not None and offset < highest[0]:
                out.append((producer, partition, highest[1], msg_id))
            if highest is None or offset > highest[0]:
                highest = (offset, msg_id)
    return out


def _resumes(
    events: Sequence[Event], final: Sequence[Stored]
) -> tuple[list[tuple[str, int, int, int]], list[tuple[str, int, int, int]]]:
    """Each ``resume`` against the consumer's first read on that partition after it."""
    offsets: dict[int, list[int]] = {}
    for s in final:
        offsets.setdefault(s.partition, []).append(s.offset)
    for values in offsets.values():
        values.sort()
    skips: list[tuple[str, int, int, int]] = []
    repeats: list[tuple[str, int, int, int]] = []
    for index, e in enumerate(events):
        if e.kind != "resume" or e.partition is None or e.offset is None:
            continue
        first = next(
            (
                r.offset
                for r in events[index + 1 :]
                if r.kind == "read" and r.actor == e.actor and r.partition == e.partition
            ),
            None,
        )
        if first is None:
            continue
        expected = next((o for o in offsets.get(e.partition, []) if o > e.offset), None)
        if first <= e.offset:
            repeats.append((e.actor, e.partition, e.offset, first))
        elif expected is not None and first > expected:
            skips.append((e.actor, e.partition, e.offset, first))
    return skips, repeats


def _recovery(events: Sequence[Event]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for index, e in enumerate(events):
        if e.kind != "heal":
            continue
        after = next((r.at for r in events[index + 1 :] if r.kind in ("ack", "read")), None)
        out[e.detail] = None if after is None else round(after - e.at, 3)
    return out
