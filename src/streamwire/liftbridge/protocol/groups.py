"""Consumer groups on the wire (Liftbridge >= 1.6, beta API): what JoinConsumerGroup,
FetchConsumerGroupAssignments and FetchMetadata's ``groups`` answer, as plain values.

What v1.9.0 answered (docs/liftbridge.md, "Consumer groups"): durations in nanoseconds
(``consumerTimeout``, ``coordinatorTimeout``: 15 s each by default); the group epoch as a
uint64 that is 0 for a new group and the Raft index of the last membership change after
that; FAILED_PRECONDITION for a stale epoch, a consumer that is not (or already) a member,
a stream that does not exist (on join) and a server that is not the coordinator; NOT_FOUND
for a group that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from streamwire.liftbridge.protocol._pb import api_pb2 as pb

__all__ = (
    "GROUP_CURSOR_PREFIX",
    "GroupInfo",
    "Membership",
    "assignments_from_pb",
    "group_cursor_id",
    "group_info_from_pb",
    "membership_from_pb",
)

#: Cursor id under which a group's position is stored, as go-liftbridge stores it (the
#: server itself never reads it: a member subscribes at the cursor + 1).
GROUP_CURSOR_PREFIX: Final = "__group:"

#: The server's defaults (``groups.consumer.timeout``, ``groups.coordinator.timeout``),
#: used if an answer carries no timeout.
_DEFAULT_TIMEOUT: Final = 15.0

_NS: Final = 1e9


def group_cursor_id(group: str) -> str:
    """The cursor id of ``group``'s position in each partition."""
    return f"{GROUP_CURSOR_PREFIX}{group}"


@dataclass(frozen=True, slots=True)
class Membership:
    """What JoinConsumerGroup answered."""

    coordinator: str
    """The broker id of the group coordinator."""
    epoch: int
    """The group epoch (generation) after the join."""
    consumer_timeout: float
    """Seconds without a FetchConsumerGroupAssignments after which the coordinator removes
    a member."""
    coordinator_timeout: float
    """Seconds without an answer from the coordinator after which a member should report it
    (ReportConsumerGroupCoordinator)."""


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """One group of a FetchMetadata answer."""

    group: str
    exists: bool
    coordinator: str
    epoch: int


def _seconds(ns: int) -> float:
    return ns / _NS if ns > 0 else _DEFAULT_TIMEOUT


def membership_from_pb(resp: pb.JoinConsumerGroupResponse) -> Membership:
    return Membership(
        coordinator=resp.coordinator,
        epoch=int(resp.epoch),
        consumer_timeout=_seconds(int(resp.consumerTimeout)),
        coordinator_timeout=_seconds(int(resp.coordinatorTimeout)),
    )


def group_info_from_pb(group: str, resp: pb.FetchMetadataResponse) -> GroupInfo:
    """``group``'s entry of a FetchMetadata answer (``exists=False`` if the server said
    UNKNOWN_GROUP or left it out)."""
    for g in resp.groupMetadata:
        if g.groupId == group:
            ok = g.error == pb.ConsumerGroupMetadata.Error.OK
            return GroupInfo(group, ok, g.coordinator if ok else "", int(g.epoch))
    return GroupInfo(group, False, "", 0)


def assignments_from_pb(resp: pb.FetchConsumerGroupAssignmentsResponse) -> dict[str, list[int]]:
    """Stream -> sorted partitions assigned to the member."""
    out: dict[str, list[int]] = {}
    for a in resp.assignments:
        out.setdefault(a.stream, []).extend(int(p) for p in a.partitions)
    return {stream: sorted(set(parts)) for stream, parts in out.items()}
