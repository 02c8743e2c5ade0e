"""Each protocol client conforms to the unified API of docs/api.md (checked by mypy --strict on
this file, and at run time by the names it must have)."""

from __future__ import annotations

import inspect

import pytest

import streamwire
import streamwire.rabbitmq as rmq


def rabbitmq_client(c: rmq.Client) -> streamwire.Client:
    return c  # mypy: structural conformance of the whole client


def rabbitmq_producer(p: rmq.Producer) -> streamwire.Producer:
    return p


def rabbitmq_consumer(c: rmq.Consumer) -> streamwire.Consumer:
    return c


@pytest.mark.parametrize(
    ("impl", "api"),
    [
        (rmq.Client, streamwire.Client),
        (rmq.Producer, streamwire.Producer),
        (rmq.Consumer, streamwire.Consumer),
    ],
)
def test_every_api_method_exists_and_accepts_its_keywords(impl: type, api: type) -> None:
    for name, member in inspect.getmembers(api, inspect.isfunction):
        if name.startswith("_") and name not in ("__aenter__", "__aexit__", "__aiter__"):
            continue
        assert hasattr(impl, name), f"{impl.__name__} lacks {name}"
        wanted = inspect.signature(member).parameters
        got = inspect.signature(getattr(impl, name)).parameters
        for param in wanted.values():
            if param.kind is param.KEYWORD_ONLY:
                assert param.name in got or any(p.kind is p.VAR_KEYWORD for p in got.values()), (
                    f"{impl.__name__}.{name} lacks keyword {param.name}"
                )
