"""The committed protobuf code is exactly what the recorded tools generate from the vendored
api.proto (v1.9.0), and the vendored file is the one named in PROVENANCE.md.

Run as ``python -m tests.unit.liftbridge.test_pb_generated --write`` to regenerate.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import streamwire.liftbridge.protocol._pb as pb_package

PB_DIR = Path(pb_package.__file__).resolve().parent
GENERATED = ("api_pb2.py", "api_pb2.pyi")
PROTO_SHA256 = "63c017b19089696a234e438a3afc4a5c4bc9bafbe8722fce64fd3fb646cc1609"


def generate(out: Path) -> None:
    """Run grpcio-tools' protoc with mypy-protobuf's plugin, as PROVENANCE.md records."""
    proto = out / "api.proto"
    if proto.resolve() != (PB_DIR / "api.proto").resolve():
        shutil.copyfile(PB_DIR / "api.proto", proto)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I.",
            "--python_out=.",
            "--mypy_out=.",
            "api.proto",
        ],
        cwd=out,
        env=env,
        check=True,
        capture_output=True,
    )
    if proto.resolve() != (PB_DIR / "api.proto").resolve():
        proto.unlink()


def test_vendored_proto_is_v1_9_0() -> None:
    digest = hashlib.sha256((PB_DIR / "api.proto").read_bytes()).hexdigest()
    assert digest == PROTO_SHA256
    provenance = (PB_DIR / "PROVENANCE.md").read_text(encoding="utf-8")
    assert PROTO_SHA256 in provenance
    assert "v1.9.0" in provenance


def test_generated_files_are_current(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    if shutil.which("protoc-gen-mypy", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mypy-protobuf's protoc-gen-mypy is not installed next to the interpreter")
    generate(tmp_path)
    for name in GENERATED:
        fresh = (tmp_path / name).read_text(encoding="utf-8")
        committed = (PB_DIR / name).read_text(encoding="utf-8")
        assert fresh == committed, (
            f"{name} differs from what the installed grpcio-tools/mypy-protobuf generate; "
            "see src/streamwire/liftbridge/protocol/_pb/PROVENANCE.md"
        )


def test_service_is_proto_api() -> None:
    from streamwire.liftbridge._grpc import METHODS

    assert METHODS["CreateStream"].path == "/proto.API/CreateStream"
    assert METHODS["Subscribe"].server_streaming
    assert METHODS["PublishAsync"].client_streaming
    assert len(METHODS) == 16


def test_coexists_with_gufo_liftbridge() -> None:
    """gufo-liftbridge registers the same api.proto in the default descriptor pool."""
    gufo_pb = pytest.importorskip("gufo.liftbridge.api_pb2")
    ours = importlib.import_module("streamwire.liftbridge.protocol._pb.api_pb2")
    assert gufo_pb.DESCRIPTOR.serialized_pb == ours.DESCRIPTOR.serialized_pb
    assert gufo_pb.Message is ours.Message


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.unit.liftbridge.test_pb_generated --write")
    generate(PB_DIR)
    print(f"regenerated {', '.join(GENERATED)} in {PB_DIR}")
