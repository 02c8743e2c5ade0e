"""Drive the official ``apache-iggy`` 0.9.0 client (PyPI wheel, Rust SDK 0.11.0 inside)
through every command streamwire uses, against a server at ``address``.

Used twice: ``tests/vectors/iggy/capture_wheel.py`` records the request frames it sends (the
``wheel-*.hex`` vectors), and ``tests/integration/iggy/test_double_fidelity.py`` checks that
the double answers it the way the released client expects.

Each step is ``(name, coroutine factory)``; a step's result is kept for assertions.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import apache_iggy as ig

__all__ = ("Step", "steps")

Step = tuple[str, Callable[[], Awaitable[Any]]]


def steps(client: Any) -> list[Step]:
    """The scripted session, in order (the client must be connected, not logged in)."""
    c = client
    perms = ig.Permissions(ig.GlobalPermissions(read_streams=True, poll_messages=True))
    return [
        ("ping-before-login", lambda: c.ping()),
        ("login", lambda: c.login_user("iggy", "iggy")),
        ("create-stream", lambda: c.create_stream("s1")),
        ("create-topic", lambda: c.create_topic("s1", "t1", 2)),
        (
            "create-topic-options",
            lambda: c.create_topic(
                0,
                "t2",
                3,
                compression_algorithm="gzip",
                message_expiry=ig.IggyExpiry.ExpireDuration(datetime.timedelta(seconds=60)),
                max_topic_size=ig.MaxTopicSize.Custom(1_000_000_000),
            ),
        ),
        ("get-stream", lambda: c.get_stream("s1")),
        ("get-streams", lambda: c.get_streams()),
        ("get-topic", lambda: c.get_topic("s1", "t1")),
        ("get-topics", lambda: c.get_topics("s1")),
        (
            "send-messages",
            lambda: c.send_messages(
                "s1",
                "t1",
                1,
                [ig.SendMessage("hello", id=1), ig.SendMessage(b"world", {"key1": "val"}, id=2)],
            ),
        ),
        (
            "poll-messages",
            lambda: c.poll_messages(
                "s1",
                "t1",
                consumer=ig.Consumer.Single("c1"),
                polling_strategy=ig.PollingStrategy.Offset(0),
                count=10,
                auto_commit=False,
                partition_id=1,
            ),
        ),
        (
            "poll-first",
            lambda: c.poll_messages(
                "s1",
                "t1",
                consumer=ig.Consumer.Single(7),
                polling_strategy=ig.PollingStrategy.First(),
                count=1,
                auto_commit=True,
                partition_id=1,
            ),
        ),
        (
            "poll-next",
            lambda: c.poll_messages(
                "s1",
                "t1",
                consumer=ig.Consumer.Single(7),
                polling_strategy=ig.PollingStrategy.Next(),
                count=10,
                auto_commit=False,
                partition_id=1,
            ),
        ),
        (
            "poll-last",
            lambda: c.poll_messages(
                "s1",
                "t1",
                consumer=ig.Consumer.Single("c1"),
                polling_strategy=ig.PollingStrategy.Last(),
                count=1,
                auto_commit=False,
                partition_id=1,
            ),
        ),
        (
            "poll-timestamp",
            lambda: c.poll_messages(
                "s1",
                "t1",
                consumer=ig.Consumer.Single("c1"),
                polling_strategy=ig.PollingStrategy.Timestamp(0),
                count=10,
                auto_commit=False,
                partition_id=1,
            ),
        ),
        ("create-partitions", lambda: c.create_partitions(0, 0, 2)),
        ("delete-partitions", lambda: c.delete_partitions(0, 0, 2)),
        ("create-consumer-group", lambda: c.create_consumer_group(0, 0, "g1")),
        ("join-consumer-group", lambda: c.join_consumer_group(0, 0, "g1")),
        ("get-consumer-group", lambda: c.get_consumer_group(0, 0, "g1")),
        ("get-consumer-groups", lambda: c.get_consumer_groups(0, 0)),
        (
            "poll-group",
            lambda: c.poll_messages(
                "s1",
                "t1",
                consumer=ig.Consumer.Group("g1"),
                polling_strategy=ig.PollingStrategy.Next(),
                count=10,
                auto_commit=True,
            ),
        ),
        ("leave-consumer-group", lambda: c.leave_consumer_group(0, 0, "g1")),
        ("delete-consumer-group", lambda: c.delete_consumer_group(0, 0, "g1")),
        ("get-stats", lambda: c.get_stats()),
        ("create-user", lambda: c.create_user("alice", "secret1", permissions=perms)),
        ("get-user", lambda: c.get_user("alice")),
        ("get-users", lambda: c.get_users()),
        ("update-user", lambda: c.update_user("alice", username="alice2")),
        ("update-permissions", lambda: c.update_permissions("alice2", None)),
        ("change-password", lambda: c.change_password("alice2", "secret1", "secret2")),
        ("delete-user", lambda: c.delete_user("alice2")),
        ("purge-topic", lambda: c.purge_topic("s1", "t2")),
        ("delete-topic", lambda: c.delete_topic("s1", "t2")),
        ("purge-stream", lambda: c.purge_stream("s1")),
        ("logout", lambda: c.logout_user()),
    ]
