"""Every transport module declares __all__, and the package re-exports the public names."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import streamwire.transport as transport
from streamwire.transport import ByteStream, ScriptedStream, TcpStream

MODULES = sorted(
    f"streamwire.transport.{info.name}" for info in pkgutil.iter_modules(transport.__path__)
)


@pytest.mark.parametrize("name", MODULES)
def test_module_has_complete_all(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert isinstance(exported, tuple)
    assert len(set(exported)) == len(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr}"


REEXPORTED = (
    "_errors",
    "backoff",
    "base",
    "deadline",
    "inflight",
    "portal",
    "scripted",
    "tcp",
    "tls",
)


def test_package_reexports_the_public_names() -> None:
    assert len(set(transport.__all__)) == len(transport.__all__)
    for attr in transport.__all__:
        assert hasattr(transport, attr), attr
    for short in REEXPORTED:
        module = importlib.import_module(f"streamwire.transport.{short}")
        for attr in module.__all__:
            assert getattr(transport, attr) is getattr(module, attr), f"{short}.{attr}"


def test_streams_satisfy_the_protocol_statically() -> None:
    def accepts(stream: ByteStream) -> ByteStream:
        return stream

    # mypy checks these assignments; at runtime the Protocol is runtime_checkable.
    scripted: type[ByteStream] = ScriptedStream
    tcp: type[ByteStream] = TcpStream
    assert accepts(ScriptedStream()) is not None
    assert scripted is ScriptedStream
    assert tcp is TcpStream
