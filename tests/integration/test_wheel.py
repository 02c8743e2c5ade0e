"""The wheel as a user installs it: ``pip install <wheel>`` with no extras, in a fresh venv of
each supported Python found on the machine.

The core must publish and consume on RabbitMQ Streams (the harness's broker) and Iggy (the
conformance double, served from this process), and Liftbridge must fail with a
:class:`~streamwire.errors.MissingDependency` that names the install to run. Needs PyPI for the
build backend and the core dependencies.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import require
from tests.iggy_double import IggyDouble
from tests.iggy_lanes import unique

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
SUPPORTED = ("3.11", "3.12", "3.13")
_PIP_TIMEOUT = 600.0
_SCRIPT_TIMEOUT = 120.0

USER_SCRIPT = r"""
import asyncio, importlib, importlib.util, sys

import streamwire
from streamwire.errors import ConfigurationError, MissingDependency

INSTALL = "pip install 'streamwire[liftbridge]'"


async def round_trip(url: str, stream: str) -> None:
    async with streamwire.connect(url, timeout=10.0) as client:
        await client.create_stream(stream, exist_ok=True)
        try:
            async with client.producer(stream) as producer:
                await producer.send_and_wait(b"from a bare wheel", headers={"n": 7})
            async with client.consumer(stream, offset="first") as consumer:
                batch = await consumer.next_batch(10, timeout=10.0)
            assert [m.value for m in batch] == [b"from a bare wheel"], batch
            assert batch[0].headers["n"].as_int() == 7
        finally:
            await client.delete_stream(stream, missing_ok=True)
    print("round trip ok:", url.split("://")[0])


async def main() -> None:
    rabbitmq_url, rabbitmq_stream, iggy_url, iggy_stream = sys.argv[1:5]
    for extra_module in ("nats", "grpc", "google.protobuf", "pyspark", "pytest"):
        try:
            found = importlib.util.find_spec(extra_module) is not None
        except ModuleNotFoundError:
            found = False
        assert not found, f"{extra_module} is installed without any extra"
    await round_trip(rabbitmq_url, rabbitmq_stream)
    await round_trip(iggy_url, iggy_stream)
    try:
        importlib.import_module("streamwire.liftbridge")
    except MissingDependency as exc:
        assert INSTALL in str(exc), exc
        assert isinstance(exc, ImportError)
        print("liftbridge import:", exc)
    else:
        raise AssertionError("streamwire.liftbridge imported without the liftbridge extra")
    try:
        await streamwire.connect("liftbridge://127.0.0.1:9/", timeout=1.0)
    except ConfigurationError as exc:
        assert INSTALL in str(exc), exc
        print("liftbridge connect:", exc)
    else:
        raise AssertionError("connect('liftbridge://') worked without the liftbridge extra")


asyncio.run(main())
"""


def _runs(python: str, version: str) -> bool:
    try:
        probe = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return False
    return probe.returncode == 0 and probe.stdout.strip() == version


def _interpreter(version: str) -> str | None:
    """An interpreter of ``version``: this one, one on PATH, or one pyenv installed (its shims
    answer only for the selected versions)."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [shutil.which(f"python{version}")]
    candidates += [
        str(p) for p in sorted(pyenv_root.glob(f"versions/{version}*/bin/python{version}"))
    ]
    return next((c for c in candidates if c and _runs(c, version)), None)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), "."],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=_PIP_TIMEOUT,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = out.glob("streamwire-*.whl")
    return found


def test_the_wheel_carries_the_license_and_the_type_marker(wheel: Path) -> None:
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata_name = next(name for name in names if name.endswith(".dist-info/METADATA"))
        metadata = archive.read(metadata_name).decode()
    assert any(name.endswith("licenses/LICENSE") for name in names), names
    assert "streamwire/py.typed" in names
    assert "License-Expression: Apache-2.0" in metadata
    for version in SUPPORTED:
        assert f"Programming Language :: Python :: {version}" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [line for line in requires if "extra ==" not in line]
    assert not any(name in line for line in core for name in ("grpcio", "protobuf", "nats-py"))
    assert any("nats-py" in line and "extra == 'liftbridge'" in line for line in requires)


@pytest.mark.parametrize("version", SUPPORTED)
async def test_a_bare_wheel_round_trips_on_rabbitmq_and_iggy(
    version: str, wheel: Path, tmp_path: Path
) -> None:
    python = _interpreter(version)
    if python is None:
        pytest.skip(f"no python{version} on this machine")
    rabbitmq = require("rabbitmq")
    env_dir = tmp_path / "venv"
    await asyncio.to_thread(
        subprocess.run,
        [python, "-m", "venv", str(env_dir)],
        check=True,
        capture_output=True,
        timeout=_PIP_TIMEOUT,
    )
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    installed = await asyncio.to_thread(
        subprocess.run,
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        timeout=_PIP_TIMEOUT,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT, encoding="utf-8")
    async with IggyDouble() as double:
        proc = await asyncio.create_subprocess_exec(
            str(bin_dir / "python"),
            str(script),
            rabbitmq.url,
            unique("wheel"),
            double.url,
            unique("wheel"),  # a bare name: Iggy's default topic
            cwd=tmp_path,  # not the checkout: only the installed wheel is importable
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(proc.communicate(), _SCRIPT_TIMEOUT)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
    text = output.decode(errors="replace")
    assert proc.returncode == 0, text
    assert "round trip ok: rabbitmq-stream" in text
    assert "round trip ok: iggy" in text
    assert "liftbridge connect:" in text


LIFTBRIDGE_SCRIPT = r"""
import asyncio, sys

import streamwire


async def main() -> None:
    url, stream = sys.argv[1:3]
    async with streamwire.connect(url, timeout=10.0) as client:
        await client.create_stream(stream)
        try:
            async with client.producer(stream) as producer:
                await producer.send_and_wait(b"via the extra", headers={"n": 1})
            async with client.consumer(stream, offset="first") as consumer:
                batch = await consumer.next_batch(10, timeout=10.0)
            assert [m.value for m in batch] == [b"via the extra"], batch
        finally:
            await client.delete_stream(stream, missing_ok=True)
    print("round trip ok: liftbridge")


asyncio.run(main())
"""


async def test_the_liftbridge_extra_adds_liftbridge(wheel: Path, tmp_path: Path) -> None:
    """``pip install '<wheel>[liftbridge]'`` in a fresh venv of this interpreter, then a round
    trip on the harness's Liftbridge (one Python only: the extra's wheels are large)."""
    broker, nats = require("liftbridge"), require("nats")
    env_dir = tmp_path / "venv"
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120
    )
    python = str(env_dir / "bin" / "python")
    installed = await asyncio.to_thread(
        subprocess.run,
        [python, "-m", "pip", "install", "--quiet", f"{wheel}[liftbridge]"],
        capture_output=True,
        text=True,
        timeout=_PIP_TIMEOUT,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    script = tmp_path / "liftbridge_user.py"
    script.write_text(LIFTBRIDGE_SCRIPT, encoding="utf-8")
    url = f"liftbridge://{broker.host}:{broker.port}?nats=nats://{nats.host}:{nats.port}"
    result = await asyncio.to_thread(
        subprocess.run,
        [python, str(script), url, unique("wheel-lb")],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=_SCRIPT_TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "round trip ok: liftbridge" in result.stdout
