"""Enforce the layer rules of docs/architecture.md by reading every module's imports (AST),
and by importing the sans-IO layer in a fresh interpreter.

* The sans-IO layer is ``streamwire.codec`` and every ``streamwire.<protocol>.protocol``
  package (the Liftbridge protobuf classes included). Its modules import only what
  ``sans_io_allows`` lists: stdlib modules that do no I/O, the pure codecs it uses (crc32c,
  xxhash, cramjam, google.protobuf), ``streamwire.codec``, ``streamwire.errors`` and their own
  protocol package. Never asyncio, socket, ssl, selectors, time, threading, subprocess,
  concurrent, nats, grpc, anyio, ``streamwire.transport`` nor a driver module.
* Importing the sans-IO layer loads none of those, however indirectly.
* Only ``streamwire.liftbridge`` imports nats and grpc.
* Only ``streamwire.transport`` opens sockets (socket/ssl), besides liftbridge's NATS TLS.
* ``streamwire.codec`` depends on nothing in streamwire but itself and ``errors``.
* ``streamwire._native`` (the optional compiled loops of the codec, pure-Python fallback
  elsewhere, and ``_native.bodies``, a loop every producer shares with its pure twin) is part
  of the sans-IO layer's allowance: it does no I/O and reaches only ``streamwire.codec`` and
  ``streamwire.errors`` (reading the environment once, at import).

How streamwire's own modules import each other (no cycle, the brokers independent, no import
up the layers, Spark and the CLI on the unified API) is import-linter's to check:
``test_import_contracts.py``.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import streamwire

SRC = Path(streamwire.__file__).parent
PROTOCOLS = ("rabbitmq", "liftbridge", "iggy")
NO_IO = (
    "asyncio",
    "socket",
    "ssl",
    "selectors",
    "time",
    "threading",
    "subprocess",
    "concurrent",
    "nats",
    "grpc",
    "anyio",
    "streamwire.transport",
)

# What the sans-IO layer may import. Stdlib modules that do no I/O (top-level names):
PURE_STDLIB = frozenset(
    {
        "__future__",
        "abc",
        "base64",
        "binascii",
        "bisect",
        "builtins",
        "codecs",
        "collections",
        "dataclasses",
        "datetime",
        "decimal",
        "enum",
        "functools",
        "hashlib",
        "heapq",
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "re",
        "string",
        "struct",
        "types",
        "typing",
        "uuid",
        "zlib",
    }
)
# Stdlib modules that can do I/O, of which the layer may use only these functions: entropy as
# an injectable default (``randbytes=os.urandom``), the interpreter version for client properties.
RESTRICTED_STDLIB = {"os": frozenset({"urandom"}), "platform": frozenset({"python_version"})}
# Third-party pure codecs the layer uses.
PURE_THIRD_PARTY = ("crc32c", "xxhash", "cramjam", "google.protobuf")


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


FILES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def all_modules() -> dict[str, set[str]]:
    return {
        name: imports_of(p.read_text(), name, is_package=p.name == "__init__.py")
        for name, p in FILES.items()
    }


def hits(imported: set[str], forbidden: tuple[str, ...]) -> set[str]:
    return {i for i in imported for f in forbidden if i == f or i.startswith(f + ".")}


def is_sans_io(name: str) -> bool:
    parts = name.split(".")
    return (
        name == "streamwire.codec"
        or name.startswith("streamwire.codec.")
        or (len(parts) > 2 and parts[1] in PROTOCOLS and parts[2] == "protocol")
    )


def sans_io_allows(name: str, imported: str) -> bool:
    """Whether sans-IO module ``name`` may import ``imported`` (the whitelist)."""
    allowed: tuple[str, ...] = (
        "streamwire.codec",
        "streamwire.errors",
        "streamwire._native",
        *PURE_THIRD_PARTY,
    )
    parts = name.split(".")
    if parts[1] in PROTOCOLS:
        allowed = (*allowed, f"streamwire.{parts[1]}.protocol")
    top = imported.split(".")[0]
    return top in PURE_STDLIB or top in RESTRICTED_STDLIB or bool(hits({imported}, allowed))


def restricted_uses(source: str) -> set[str]:
    """Uses of a ``RESTRICTED_STDLIB`` module beyond its allowed functions (or under an alias)."""
    nodes = list(ast.walk(ast.parse(source)))
    bad: set[str] = set()
    imported: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in RESTRICTED_STDLIB:
                    imported.add(top)
                    if alias.asname or alias.name != top:
                        bad.add(f"import {alias.name} as {alias.asname}")
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            top = node.module.split(".")[0]
            if top in RESTRICTED_STDLIB:
                ok = RESTRICTED_STDLIB[top] if node.module == top else frozenset()
                bad.update(f"{node.module}.{a.name}" for a in node.names if a.name not in ok)
    attributes: set[int] = set()  # the Name nodes of ``os.<attr>``
    for node in nodes:
        value = node.value if isinstance(node, ast.Attribute) else None
        if isinstance(node, ast.Attribute) and isinstance(value, ast.Name) and value.id in imported:
            attributes.add(id(value))
            if node.attr not in RESTRICTED_STDLIB[value.id]:
                bad.add(f"{value.id}.{node.attr}")
    for node in nodes:
        if isinstance(node, ast.Name) and node.id in imported and id(node) not in attributes:
            bad.add(f"{node.id} itself")
    return bad


MODULES = all_modules()
SANS_IO = sorted(name for name in MODULES if is_sans_io(name))


def test_the_scan_sees_the_codec_layer() -> None:
    assert "streamwire.codec.reader" in MODULES
    assert {"streamwire.codec.amqp.types", "streamwire.liftbridge.protocol._pb.api_pb2"} <= set(
        SANS_IO
    )
    assert "streamwire.iggy.protocol.machine" in SANS_IO
    assert "streamwire.rabbitmq.client" not in SANS_IO
    assert "streamwire.errors" in MODULES["streamwire.codec.reader"] or any(
        i.startswith("streamwire.errors") for i in MODULES["streamwire.codec.reader"]
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_layer_rules(name: str) -> None:
    imported = MODULES[name]
    parts = name.split(".")
    if is_sans_io(name):
        assert not hits(imported, NO_IO), f"{name} is sans-IO but imports {hits(imported, NO_IO)}"
        outside = sorted(i for i in imported if not sans_io_allows(name, i))
        assert not outside, f"{name} is sans-IO but imports {outside}, which the layer may not"
        misuse = restricted_uses(FILES[name].read_text())
        assert not misuse, f"{name} is sans-IO but uses {sorted(misuse)}"
    if name.startswith("streamwire.codec"):
        internal = {i for i in imported if i.startswith("streamwire.")}
        allowed = ("streamwire.codec", "streamwire.errors")
        assert internal == hits(internal, allowed), f"{name} reaches above the codec layer"
    if name.startswith("streamwire._native"):
        assert not hits(imported, NO_IO), f"{name} imports {hits(imported, NO_IO)}"
        internal = {i for i in imported if i.startswith("streamwire.")}
        allowed_native = ("streamwire.codec", "streamwire.errors", "streamwire._native")
        assert internal == hits(internal, allowed_native), f"{name} reaches above the codec"
    if len(parts) < 2 or parts[1] != "liftbridge":
        assert not hits(imported, ("nats", "grpc")), f"{name} imports nats/grpc"
    if len(parts) < 2 or parts[1] not in ("transport", "liftbridge"):
        assert not hits(imported, ("socket", "ssl")), f"{name} touches sockets outside transport"


def test_rule_checker_catches_a_violation() -> None:
    source = "import asyncio\nfrom ..transport import tcp\n"
    found = imports_of(source, "streamwire.codec.bad")
    assert hits(found, NO_IO) == {"asyncio", "streamwire.transport", "streamwire.transport.tcp"}


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("streamwire.codec.bad", "def f() -> None:\n    import time\n"),
        ("streamwire.codec.bad", "import logging\n"),
        ("streamwire.codec.bad", "from ..rabbitmq.protocol import frames\n"),
        ("streamwire.iggy.protocol.bad", "from streamwire.iggy import client\n"),
        ("streamwire.iggy.protocol.bad", "from streamwire.rabbitmq.protocol import frames\n"),
        ("streamwire.iggy.protocol.bad", "from .. import _connection\n"),
        ("streamwire.liftbridge.protocol.bad", "import google\n"),
        ("streamwire.liftbridge.protocol.bad", "import mmh3\n"),
        ("streamwire.rabbitmq.protocol.bad", "import streamwire\n"),
    ],
)
def test_whitelist_rejects(name: str, source: str) -> None:
    found = imports_of(source, name)
    assert any(not sans_io_allows(name, i) for i in found), found


def test_whitelist_accepts_what_the_layer_needs() -> None:
    source = (
        "from __future__ import annotations\nimport collections.abc\nimport crc32c\n"
        "from google.protobuf import message\nfrom . import envelope\n"
        "from ...codec.reader import Reader\nfrom streamwire.errors import DecodeError\n"
    )
    name = "streamwire.liftbridge.protocol.bad"
    assert all(sans_io_allows(name, i) for i in imports_of(source, name))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\nx = os.urandom(4)\n", set()),
        ("import os\ndef f(r=os.urandom): ...\n", set()),
        ("from os import urandom\n", set()),
        ("import platform\nv = platform.python_version()\n", set()),
        ("import os\nos.system('ls')\n", {"os.system"}),
        ("from os import path\n", {"os.path"}),
        ("import os.path\n", {"import os.path as None"}),
        ("import os as o\n", {"import os as o"}),
        ("import platform\nplatform.uname()\n", {"platform.uname"}),
        ("import os\nf(os)\n", {"os itself"}),
    ],
)
def test_restricted_stdlib_uses(source: str, expected: set[str]) -> None:
    assert restricted_uses(source) == expected


# Imported in a fresh interpreter: which modules the sans-IO layer ends up loading. The parent
# packages ``streamwire`` and ``streamwire.<protocol>`` are registered as bare namespaces first,
# because their ``__init__`` re-export the drivers by design; what is measured is the layer
# itself and everything it pulls in. The pure third-party codecs are imported before the
# baseline is taken: crc32c's ``__init__`` reads its version with importlib.metadata, which loads
# socket and threading (through email and zipfile) without using them.
IMPORT_LAYER = textwrap.dedent(
    """
    import importlib, json, sys, types
    src, parents, third_party, targets = json.loads(sys.argv[1])
    for name in parents:
        package = types.ModuleType(name)
        package.__path__ = [src + "/" + "/".join(name.split(".")[1:])]
        sys.modules[name] = package
    for name in third_party:
        importlib.import_module(name)
    baseline = set(sys.modules)
    for name in targets:
        importlib.import_module(name)
    print(json.dumps([sorted(baseline), sorted(set(sys.modules) - baseline)]))
    """
)
LAYER_PACKAGES = ("streamwire.codec", *(f"streamwire.{p}.protocol" for p in PROTOCOLS))
# Never loaded, not even by the third-party codecs.
NEVER_LOADED = ("asyncio", "ssl", "subprocess", "concurrent", "grpc", "nats", "anyio")


def load_layer(package: str) -> tuple[set[str], set[str]]:
    """(modules loaded before, modules the package and all its modules add) in a fresh process."""
    targets = [package, *(n for n in SANS_IO if n.startswith(package + "."))]
    parents = ["streamwire", *(f"streamwire.{p}" for p in PROTOCOLS)]
    argument = json.dumps([str(SRC), parents, PURE_THIRD_PARTY, targets])
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_LAYER, argument],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    baseline, added = json.loads(done.stdout)
    return set(baseline), set(added)


@pytest.mark.parametrize("package", LAYER_PACKAGES)
def test_importing_the_sans_io_layer_loads_no_io(package: str) -> None:
    baseline, added = load_layer(package)
    assert package in added
    assert not hits(baseline, NEVER_LOADED), f"a pure codec loads {hits(baseline, NEVER_LOADED)}"
    io = {n if n.startswith("streamwire.") else n.split(".")[0] for n in hits(added, NO_IO)}
    assert not io, f"importing {package} loads {sorted(io)}"
    above = {n for n in added if n.startswith("streamwire.") and not is_sans_io(n)}
    # the compiled loops, if built, and their pure twins
    native = {"streamwire._native", "streamwire._native._core", "streamwire._native.bodies"}
    assert above <= {"streamwire.errors", *native}, f"importing {package} loads {sorted(above)}"


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
