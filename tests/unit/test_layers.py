"""Enforce the layer rules of ARCHITECTURE.md by reading every module's imports (AST).

* ``streamwire.codec`` and every ``streamwire.<protocol>.protocol`` import no I/O:
  not asyncio, socket, ssl, selectors, nats, grpc, nor streamwire.transport.
* Protocol packages never import each other.
* Only ``streamwire.liftbridge`` imports nats and grpc.
* Only ``streamwire.transport`` opens sockets (socket/ssl), besides liftbridge's NATS TLS.
* ``streamwire.codec`` depends on nothing in streamwire but itself and ``errors``.
* ``streamwire.spark`` and ``streamwire.cli`` use the unified API, not protocol internals.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import streamwire

SRC = Path(streamwire.__file__).parent
PROTOCOLS = ("rabbitmq", "liftbridge", "iggy")
NO_IO = ("asyncio", "socket", "ssl", "selectors", "nats", "grpc", "anyio", "streamwire.transport")


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, name: str, *, is_package: bool = False) -> set[str]:
    """Every module a file imports, anywhere in it (lazy imports included)."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{alias.name}" for alias in node.names)
    return found


def all_modules() -> dict[str, set[str]]:
    return {
        module_name(p): imports_of(
            p.read_text(), module_name(p), is_package=p.name == "__init__.py"
        )
        for p in sorted(SRC.rglob("*.py"))
    }


def hits(imported: set[str], forbidden: tuple[str, ...]) -> set[str]:
    return {i for i in imported for f in forbidden if i == f or i.startswith(f + ".")}


MODULES = all_modules()


def test_the_scan_sees_the_codec_layer() -> None:
    assert "streamwire.codec.reader" in MODULES
    assert "streamwire.errors" in MODULES["streamwire.codec.reader"] or any(
        i.startswith("streamwire.errors") for i in MODULES["streamwire.codec.reader"]
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_layer_rules(name: str) -> None:
    imported = MODULES[name]
    parts = name.split(".")
    sans_io = name.startswith("streamwire.codec") or (
        len(parts) > 2 and parts[1] in PROTOCOLS and parts[2] == "protocol"
    )
    if sans_io:
        assert not hits(imported, NO_IO), f"{name} is sans-IO but imports {hits(imported, NO_IO)}"
    if name.startswith("streamwire.codec"):
        internal = {i for i in imported if i.startswith("streamwire.")}
        allowed = ("streamwire.codec", "streamwire.errors")
        assert internal == hits(internal, allowed), f"{name} reaches above the codec layer"
    if len(parts) > 1 and parts[1] in PROTOCOLS:
        others = tuple(f"streamwire.{p}" for p in PROTOCOLS if p != parts[1])
        assert not hits(imported, others), f"{name} imports another protocol package"
    if len(parts) < 2 or parts[1] != "liftbridge":
        assert not hits(imported, ("nats", "grpc")), f"{name} imports nats/grpc"
    if len(parts) < 2 or parts[1] not in ("transport", "liftbridge"):
        assert not hits(imported, ("socket", "ssl")), f"{name} touches sockets outside transport"
    if len(parts) > 1 and parts[1] in ("spark", "cli"):
        internals = tuple(f"streamwire.{p}" for p in (*PROTOCOLS, "transport"))
        assert not hits(imported, internals), f"{name} must use the unified API only"


def test_rule_checker_catches_a_violation() -> None:
    source = "import asyncio\nfrom ..transport import tcp\n"
    found = imports_of(source, "streamwire.codec.bad")
    assert hits(found, NO_IO) == {"asyncio", "streamwire.transport", "streamwire.transport.tcp"}


@pytest.mark.parametrize(
    "name",
    sorted(
        m.name
        for m in pkgutil.walk_packages(streamwire.__path__, "streamwire.")
        if not m.name.rsplit(".", 1)[-1].startswith("_")
        and "._pb" not in m.name
        and not m.name.startswith(("streamwire.spark", "streamwire.cli"))
    ),
)
def test_public_modules_declare_all(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists missing names {missing}"
