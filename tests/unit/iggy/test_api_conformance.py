"""streamwire.iggy implements the unified API (``streamwire._api``, docs/api.md): checked
statically by mypy on this file and at runtime by signature inspection."""

from __future__ import annotations

import inspect

from streamwire import _api
from streamwire.iggy import Client, Consumer, Producer


def _static_check(client: Client, producer: Producer, consumer: Consumer) -> None:
    as_client: _api.Client = client
    as_producer: _api.Producer = producer
    as_consumer: _api.Consumer = consumer
    del as_client, as_producer, as_consumer


def test_unified_api_members_exist() -> None:
    for protocol, implementation in (
        (_api.Client, Client),
        (_api.Producer, Producer),
        (_api.Consumer, Consumer),
    ):
        for name, member in vars(protocol).items():
            if callable(member) and not name.startswith("_"):
                ours = getattr(implementation, name)
                wanted = inspect.signature(member).parameters
                have = inspect.signature(ours).parameters
                assert set(wanted) - {"options"} <= set(have), (implementation, name)
    assert _static_check.__annotations__
