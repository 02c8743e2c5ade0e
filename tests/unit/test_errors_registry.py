"""The exception hierarchy and the code registry."""

from __future__ import annotations

import builtins

import pytest

import streamwire
from streamwire import errors
from streamwire.codec.registry import ErrorRegistry, registry_for


def test_every_error_derives_from_the_root() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.StreamwireError), name


def test_builtin_compatibility() -> None:
    assert issubclass(errors.TimeoutError, builtins.TimeoutError)
    assert issubclass(errors.RequestTimeout, builtins.TimeoutError)
    assert issubclass(errors.ConfigurationError, ValueError)
    assert issubclass(errors.HeaderKindError, TypeError)
    with pytest.raises(builtins.TimeoutError):
        raise errors.ConnectTimeout("slow")


def test_api_names_are_exported_from_the_package() -> None:
    for name in (
        "StreamwireError",
        "ConnectError",
        "ConnectionClosed",
        "TimeoutError",
        "ProtocolError",
        "ServerError",
        "AuthenticationError",
    ):
        assert getattr(streamwire, name) is getattr(errors, name)


def test_error_data() -> None:
    e = errors.DecodeError("uint32", 12, frame="Deliver")
    assert (e.what, e.offset, e.frame) == ("uint32", 12, "Deliver")
    assert str(e) == "cannot decode uint32 in Deliver at offset 12"
    c = errors.ConnectionClosed("peer reset")
    assert c.reason == "peer reset"
    big = errors.FrameTooLargeError(10, 5)
    assert (big.size, big.limit) == (10, 5)


class _DemoError(errors.ServerError):
    protocol = "demo"


class _UnknownDemoError(_DemoError):
    """unknown demo error"""


def test_registry_define_and_lookup() -> None:
    reg = ErrorRegistry("demo", _DemoError, _UnknownDemoError)
    assert registry_for("demo") is reg
    gone = reg.define("StreamGone", 2, "Stream does not exist.", module=__name__)
    auth = reg.define(
        "AuthFailed",
        8,
        "Authentication failure.",
        connection_usable=False,
        bases=(errors.AuthenticationError,),
    )
    err = errors.ServerError.from_code("demo", 2)
    assert type(err) is gone
    assert err.code == 2
    assert err.message == "Stream does not exist."
    assert str(err) == "demo STREAM_GONE (0x0002): Stream does not exist."
    named = reg.from_code(2, "stream 's'")
    assert named.message == "stream 's'"
    assert str(named) == "demo STREAM_GONE (0x0002): Stream does not exist: stream 's'"
    assert str(reg.from_code(0x99, "odd")) == "demo error 0x0099: odd"
    assert isinstance(reg.from_code(8, "bad password"), errors.AuthenticationError)
    assert auth.connection_usable is False
    unknown = reg.from_code(0x99)
    assert type(unknown) is _UnknownDemoError
    assert unknown.code == 0x99
    assert reg.class_for(0x99) is _UnknownDemoError
    assert set(reg.codes()) == {2, 8}
    with pytest.raises(ValueError, match="taken by StreamGone"):
        reg.define("Again", 2, "dup")
    with pytest.raises(ValueError, match="exists already"):
        ErrorRegistry("demo", _DemoError, _UnknownDemoError)
    with pytest.raises(LookupError):
        registry_for("nope")
    with pytest.raises(ValueError, match="no default_code"):
        reg.register(_UnknownDemoError)


def test_the_same_situation_is_the_same_class_on_every_broker() -> None:
    from streamwire.iggy.protocol import errors as iggy
    from streamwire.liftbridge.protocol import errors as liftbridge
    from streamwire.rabbitmq.protocol import errors as rabbitmq

    exists = (
        rabbitmq.StreamAlreadyExists,
        liftbridge.StreamAlreadyExists,
        iggy.StreamNameAlreadyExists,
        iggy.TopicNameAlreadyExists,
    )
    missing = (
        rabbitmq.StreamDoesNotExist,
        liftbridge.StreamNotFound,
        *iggy.STREAM_OR_TOPIC_MISSING,
    )
    for cls in exists:
        assert issubclass(cls, streamwire.StreamAlreadyExistsError), cls
        assert issubclass(cls, errors.ServerError), cls
    for cls in missing:
        assert issubclass(cls, streamwire.StreamNotFoundError), cls
    assert not issubclass(rabbitmq.StreamNotAvailable, streamwire.StreamNotFoundError)
    assert not issubclass(iggy.ConsumerGroupNameNotFound, streamwire.StreamNotFoundError)
