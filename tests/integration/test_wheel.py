"""What a user installs: the release artefacts (``make dist``) and ``pip install`` of a clone.

- Each native wheel (``cp3X-manylinux``), with no extras, in a fresh venv of its CPython,
  selects the native core; the pure ``py3-none-any`` wheel selects pure Python. From each venv
  a user's script publishes and consumes on RabbitMQ Streams (the harness's broker) and Iggy
  (the conformance double, served from this process), and Liftbridge fails with a
  :class:`~streamwire.errors.MissingDependency` that names the install to run.
- ``pip install <checkout>`` compiles the native core where cargo is on PATH and, without
  cargo, installs pure Python and says so.

Needs PyPI for the build backend and the core dependencies.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from release.dist import build_all
from release.interpreters import SUPPORTED, find, tag
from tests.brokers import require
from tests.iggy_double import IggyDouble
from tests.iggy_lanes import unique

# both_cores: the wheels' venvs choose their own core, so the STREAMWIRE_PURE=1 pass skips this
pytestmark = [pytest.mark.integration, pytest.mark.both_cores]

REPO_ROOT = Path(__file__).resolve().parents[2]
_PIP_TIMEOUT = 600.0
_SCRIPT_TIMEOUT = 120.0

USER_SCRIPT = r"""
import asyncio, importlib, importlib.util, sys

import streamwire
from streamwire import _native
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
    print("core:", _native.reason)
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


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release artefacts: ``make dist``'s (``make test`` passes ``STREAMWIRE_DIST``), or
    built here for the CPythons the machine has (a few minutes)."""
    given = os.environ.get("STREAMWIRE_DIST")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    build_all(out, SUPPORTED, allow_missing=True)
    return out


def _one(dist: Path, pattern: str) -> Path:
    found = sorted(dist.glob(pattern))
    assert len(found) == 1, f"want one {pattern} in {dist}: {[p.name for p in found]}"
    return found[0]


def test_the_wheels_carry_the_license_and_the_type_marker(dist: Path) -> None:
    import zipfile

    wheels = sorted(dist.glob("streamwire-*.whl"))
    assert any(w.name.endswith("-py3-none-any.whl") for w in wheels), wheels
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            metadata_name = next(name for name in names if name.endswith(".dist-info/METADATA"))
            metadata = archive.read(metadata_name).decode()
        assert any(name.endswith("licenses/LICENSE") for name in names), names
        assert "streamwire/py.typed" in names
        assert "streamwire/_native/_core.pyi" in names
        assert "pyspark_streamwire/__init__.py" in names
        assert "License-Expression: Apache-2.0" in metadata
        for version in SUPPORTED:
            assert f"Programming Language :: Python :: {version}" in metadata
        requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
        core = [line for line in requires if "extra ==" not in line]
        assert not any(name in line for line in core for name in ("grpcio", "protobuf", "nats-py"))
        liftbridge = re.compile(r"""extra == ["']liftbridge["']""")  # either quote is PEP 508
        assert any("nats-py" in line and liftbridge.search(line) for line in requires)


async def _venv(python: str, env_dir: Path) -> Path:
    await asyncio.to_thread(
        subprocess.run,
        [python, "-m", "venv", str(env_dir)],
        check=True,
        capture_output=True,
        timeout=_PIP_TIMEOUT,
    )
    return env_dir / ("Scripts" if os.name == "nt" else "bin")


async def _pip_install(
    bin_dir: Path, target: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    installed = await asyncio.to_thread(
        subprocess.run,
        [str(bin_dir / "python"), "-m", "pip", "install", "-v", target],
        capture_output=True,
        text=True,
        timeout=_PIP_TIMEOUT,
        env=env,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout[-4000:] + installed.stderr[-4000:]
    return installed


async def _user_run(bin_dir: Path, tmp_path: Path, rabbitmq_url: str) -> str:
    """USER_SCRIPT in the venv of ``bin_dir`` against the harness's RabbitMQ and an Iggy
    double served from this process; its output."""
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT, encoding="utf-8")
    async with IggyDouble() as double:
        proc = await asyncio.create_subprocess_exec(
            str(bin_dir / "python"),
            str(script),
            rabbitmq_url,
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
    return text


@pytest.mark.parametrize("version", SUPPORTED)
async def test_a_native_wheel_selects_its_core_and_round_trips(
    version: str, dist: Path, tmp_path: Path
) -> None:
    """``pip install <the cp3X manylinux wheel>``, no extras, in a fresh venv of CPython 3.X:
    the native core is selected and a user's round trip works on RabbitMQ and Iggy."""
    python = find(version)
    if python is None:
        pytest.skip(f"no python{version} on this machine")
    rabbitmq = require("rabbitmq")
    wheel = _one(dist, f"streamwire-*-{tag(version)}-{tag(version)}-manylinux_*.whl")
    bin_dir = await _venv(python, tmp_path / "venv")
    await _pip_install(bin_dir, str(wheel))
    text = await _user_run(bin_dir, tmp_path, rabbitmq.url)
    assert "core: native core " in text, text


async def test_the_pure_wheel_runs_pure_python_and_round_trips(dist: Path, tmp_path: Path) -> None:
    """The ``py3-none-any`` wheel, for interpreters and platforms without a native one."""
    rabbitmq = require("rabbitmq")
    bin_dir = await _venv(sys.executable, tmp_path / "venv")
    await _pip_install(bin_dir, str(_one(dist, "streamwire-*-py3-none-any.whl")))
    text = await _user_run(bin_dir, tmp_path, rabbitmq.url)
    assert "core: pure Python: native core not built (no Rust toolchain" in text, text


def _without_cargo() -> dict[str, str]:
    """This environment with no cargo to be found: PATH without the folders that hold one."""
    path = [
        folder
        for folder in os.environ.get("PATH", "").split(os.pathsep)
        if folder and not (Path(folder) / "cargo").exists()
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("CARGO", "CARGO_HOME", "RUSTUP_HOME")}
    env["PATH"] = os.pathsep.join(path)
    return env


async def test_pip_install_of_a_clone_without_cargo_is_pure_python(tmp_path: Path) -> None:
    """The README's ``pip install ./streamwire`` on a machine with no Rust toolchain: the
    install succeeds, says why in one line, and selects pure Python."""
    env = _without_cargo()
    assert shutil.which("cargo", path=env["PATH"]) is None
    bin_dir = await _venv(sys.executable, tmp_path / "venv")
    installed = await _pip_install(bin_dir, str(REPO_ROOT), env)
    assert "streamwire: cargo not found, installing the pure-Python package" in (
        installed.stdout + installed.stderr
    )
    reason = await _reason(bin_dir, tmp_path)
    assert reason.startswith("pure Python: native core not built (no Rust toolchain"), reason
    assert "circular import" not in reason


async def test_pip_install_of_a_clone_with_cargo_selects_the_native_core(tmp_path: Path) -> None:
    """The same ``pip install ./streamwire`` where cargo is on PATH compiles the core."""
    if shutil.which("cargo") is None:
        pytest.skip("no cargo on PATH")
    bin_dir = await _venv(sys.executable, tmp_path / "venv")
    await _pip_install(bin_dir, str(REPO_ROOT))
    reason = await _reason(bin_dir, tmp_path)
    assert reason.startswith("native core "), reason


async def _as_user(cmd: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``cmd`` run as a user would, outside the checkout (only the installed package is
    importable), its output captured."""
    return await asyncio.to_thread(
        subprocess.run,
        cmd,
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=_SCRIPT_TIMEOUT,
        check=False,
    )


async def _reason(bin_dir: Path, tmp_path: Path) -> str:
    """The last line of ``streamwire --version``: the core this install selected."""
    done = await _as_user([str(bin_dir / "streamwire"), "--version"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1]


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


async def test_the_liftbridge_extra_adds_liftbridge(dist: Path, tmp_path: Path) -> None:
    """``pip install '<wheel>[liftbridge]'`` in a fresh venv of this interpreter, then a round
    trip on the harness's Liftbridge (one Python only: the extra's wheels are large)."""
    broker, nats = require("liftbridge"), require("nats")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    wheel = _one(dist, f"streamwire-*-{tag(version)}-{tag(version)}-manylinux_*.whl")
    bin_dir = await _venv(sys.executable, tmp_path / "venv")
    await _pip_install(bin_dir, f"{wheel}[liftbridge]")
    script = tmp_path / "liftbridge_user.py"
    script.write_text(LIFTBRIDGE_SCRIPT, encoding="utf-8")
    url = f"liftbridge://{broker.host}:{broker.port}?nats=nats://{nats.host}:{nats.port}"
    python = str(bin_dir / "python")
    result = await _as_user([python, str(script), url, unique("wheel-lb")], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "round trip ok: liftbridge" in result.stdout
